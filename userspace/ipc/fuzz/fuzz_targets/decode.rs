//! Arbitrary bytes through the framing reader and the decoder: no panic,
//! and whatever decodes re-encodes to a line that decodes to the same message.
#![no_main]

use clawos_ipc::codec::{decode, encode};
use clawos_ipc::framing::{Frame, FrameReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        // A small limit so the oversized path is reached too.
        let mut frames = FrameReader::with_limit(data, 1024);
        while let Ok(Some(frame)) = frames.next_frame().await {
            if let Frame::Line(line) = frame {
                if let Ok(message) = decode(line) {
                    let encoded = encode(&message);
                    let again = decode(&encoded[..encoded.len() - 1]).expect("re-encoded message must decode");
                    assert_eq!(again, message);
                }
            }
        }
    });
});
