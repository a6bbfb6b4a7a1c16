//! See `casement_testkit::fuzz::decode_event` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(
    init: casement_testkit::fuzz::tolerate_handled_parser_panics(),
    |data: &[u8]| casement_testkit::fuzz::decode_event(data)
);
