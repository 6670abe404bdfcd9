//! What the language bindings (`samebits-python`, `samebits-capi`) share, so that each is only
//! glue: [`run_receipt`] writes the receipt of a run on in-memory inputs (the inputs beside it,
//! since a run receipt names each input's file), [`generate`] generates and builds the
//! generation receipt, and [`verify`] re-runs a receipt of any kind (told apart as `samebits
//! verify` tells them apart) into one [`Verification`] report: match, differ (the first
//! differing step or output) or unusable (why).

mod generation;
mod run;
mod verification;

pub use generation::{Generated, generate};
pub use run::run_receipt;
pub use verification::{Status, Verification, verify};
