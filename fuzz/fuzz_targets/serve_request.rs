//! `samebits serve` request bodies through [`samebits_serve::api::parse_request`] for both
//! generation endpoints; every body must give a request or an OpenAI-style error, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use samebits_serve::api::{Endpoint, parse_request};

fuzz_target!(|data: &[u8]| {
    for endpoint in [Endpoint::Completions, Endpoint::ChatCompletions] {
        let _ = parse_request(data, endpoint, "m");
    }
});
