//! What rejecting an oversized message costs in heap allocations, measured
//! with a counting global allocator.
//!
//! Newline framing cannot know a line is too long until the limit has been
//! read, so the reader holds at most the limit (4 MiB) of one line; what it
//! must never do is hold the whole message, or allocate anything for the
//! bytes past the limit, however many there are.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use clawos_ipc::framing::{Frame, FrameReader, MAX_MESSAGE_BYTES};
use clawos_ipc::{ProtocolVersion, RateLimit};
use tokio::io::AsyncWriteExt;

const KIB: usize = 1024;

/// Each test measures the whole process's heap, so they take turns.
static MEASURING: Mutex<()> = Mutex::new(());

fn measuring() -> MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; the
// counters have no effect on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// An endless supply of `x` bytes, ending with a newline after `len` bytes,
/// then a small valid line. Generated on the fly so the input itself costs
/// no heap.
struct Line {
    remaining: usize,
    tail: &'static [u8],
}

impl tokio::io::AsyncRead for Line {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.remaining > 0 {
            let n = self.remaining.min(buf.remaining());
            buf.put_slice(&[b'x'; 8192][..n.min(8192)]);
            self.remaining -= n.min(8192);
        } else {
            let n = self.tail.len().min(buf.remaining());
            buf.put_slice(&self.tail[..n]);
            self.tail = &self.tail[n..];
        }
        std::task::Poll::Ready(Ok(()))
    }
}

/// Returns (peak live bytes while reading the line, bytes allocated from
/// the moment the limit was crossed until the next line was returned).
fn measure(line_len: usize) -> (usize, usize) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let mut reader = FrameReader::new(Line { remaining: line_len, tail: b"\nok\n" });
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        assert_eq!(reader.next_frame().await.unwrap(), Some(Frame::Oversized { limit: MAX_MESSAGE_BYTES }));
        let peak = PEAK.load(Ordering::Relaxed) - base;
        let before_discard = ALLOCATED.load(Ordering::Relaxed);
        assert_eq!(reader.next_frame().await.unwrap(), Some(Frame::Line(b"ok")));
        (peak, ALLOCATED.load(Ordering::Relaxed) - before_discard)
    })
}

#[test]
fn rejecting_an_oversized_line_never_buffers_the_whole_message() {
    let _turn = measuring();
    let (peak_small, discard_small) = measure(MAX_MESSAGE_BYTES + 1);
    let (peak_huge, discard_huge) = measure(64 * MAX_MESSAGE_BYTES);
    eprintln!(
        "4 MiB + 1: peak {} KiB, after the limit {} B; 256 MiB: peak {} KiB, after the limit {} B",
        peak_small / KIB,
        discard_small,
        peak_huge / KIB,
        discard_huge
    );
    // At most the limit plus the 64 KiB read buffer and growth slack, never the message.
    assert!(peak_small <= MAX_MESSAGE_BYTES * 3 / 2 + 64 * KIB, "peak {peak_small}");
    // Bytes past the limit are discarded without allocating: a 256 MiB line
    // costs what a 4 MiB + 1 line costs.
    assert!(peak_huge <= peak_small + 64 * KIB, "peak {peak_huge} vs {peak_small}");
    assert!(discard_small < 64 * KIB && discard_huge < 64 * KIB, "{discard_small} {discard_huge}");
}

/// Issue #23, finding 4: peers that connect and send a long line without
/// a newline before `hello` cost the server a bounded amount of memory
/// each, not the 4 MiB a line may grow to after the handshake (100 such
/// peers took the router from 5.8 MB to 430 MB).
#[test]
fn first_lines_before_hello_cost_bounded_memory() {
    const PEERS: usize = 32;
    const SENT: usize = 1024 * KIB;
    static CHUNK: [u8; 64 * KIB] = [b'x'; 64 * KIB];
    let _turn = measuring();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let name = common::start_server(common::AGENT_LOOP_POLICY, &[ProtocolVersion::V1_0], RateLimit::default());
        // Let the server start listening: its own allocations are not the peers'.
        tokio::task::yield_now().await;
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let mut peers = Vec::new();
        for _ in 0..PEERS {
            let mut stream = clawos_ipc::socket::connect_abstract(&name).unwrap();
            for _ in 0..SENT / CHUNK.len() {
                // An error means the server closed the connection: it refused the line.
                if stream.write_all(&CHUNK).await.is_err() {
                    break;
                }
            }
            peers.push(stream);
        }
        let peak = PEAK.load(Ordering::Relaxed) - base;
        eprintln!("{PEERS} peers sending {} KiB each before hello: server peak {} KiB", SENT / KIB, peak / KIB);
        // Per connection: its 64 KiB read and write buffers, a hello-sized
        // line and bookkeeping; never the line the peer sends.
        assert!(peak < PEERS * 256 * KIB, "peak {} KiB for {PEERS} peers", peak / KIB);
    });
}
