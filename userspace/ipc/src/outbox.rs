//! The writer task every connection (client or server side) uses: messages
//! queue in a bounded channel and are written in batches.

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;

use crate::codec::encode_into;
use crate::framing::READ_BUFFER_BYTES;
use crate::message::Message;

/// Messages queued for one connection's writer before senders wait (or,
/// with `try_send`, before messages are refused).
pub const OUTBOX_CAPACITY: usize = 1024;

/// An item for the writer.
pub(crate) enum Outbound {
    /// Write this message.
    Send(Message),
    /// Flush, shut the write side down and stop.
    Close,
}

/// Writes queued messages until the queue closes or a `Close` arrives.
pub(crate) async fn write_loop(mut writer: OwnedWriteHalf, mut outbox: mpsc::Receiver<Outbound>) {
    let mut buffer = Vec::with_capacity(READ_BUFFER_BYTES);
    while let Some(first) = outbox.recv().await {
        let mut close = false;
        let mut next = Some(first);
        // Batch what is already queued into one write.
        while let Some(item) = next.take() {
            match item {
                Outbound::Send(message) => encode_into(&message, &mut buffer),
                Outbound::Close => close = true,
            }
            if !close && buffer.len() < READ_BUFFER_BYTES {
                next = outbox.try_recv().ok();
            }
        }
        if writer.write_all(&buffer).await.is_err() {
            return;
        }
        buffer.clear();
        if close {
            let _ = writer.shutdown().await;
            return;
        }
    }
}
