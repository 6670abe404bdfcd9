//! Op families, one file each. Adding an op is one `register` line plus its code in the
//! family's file.

mod control_flow;
mod elementwise;
mod optional;
mod quantize;
mod sequence;
mod string;

use crate::registry::Registry;

pub fn register_all(r: &mut Registry) {
    control_flow::register(r);
    elementwise::register(r);
    optional::register(r);
    quantize::register(r);
    sequence::register(r);
    string::register(r);
}
