//! The YPIR server's Answer on untrusted query bytes
//! (`Server::answer_bytes`, tiny TOY database): any input is answered or
//! refused with an error, and every answer is a well-formed response of
//! the parameter set's exact length.
#![no_main]

use ct_auditor_fuzz::tiny_pir;
use libfuzzer_sys::fuzz_target;
use pir_core::wire::{response_len, Query, Response};

fuzz_target!(|data: &[u8]| {
    let pir = tiny_pir();
    let answered = pir.server.answer_bytes(data);
    if let Ok(resp) = &answered {
        assert!(
            Query::from_bytes(data).is_ok(),
            "answered an unparsable query"
        );
        assert_eq!(resp.len(), response_len(pir.server.params()));
        let r = Response::from_bytes(resp).expect("the server's own answer parses");
        let _ = pir.client.extract(&pir.key, &r);
    }
});
