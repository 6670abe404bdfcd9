//! Op families, one file each. Adding an op is one `register` line plus its code in the
//! family's file.

mod elementwise;
mod numeric;
mod reduce;

use crate::registry::Registry;

pub fn register_all(r: &mut Registry) {
    elementwise::register(r);
    reduce::register(r);
}
