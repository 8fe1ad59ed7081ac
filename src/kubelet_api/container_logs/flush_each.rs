//! A body stream that has each chunk written to the connection on its own: after every item
//! it is pending once (and wakes itself at once), so hyper flushes what it has buffered before
//! it writes more, the body's end included.
//!
//! Why: the API server's websocket log reader (`wsstream`'s `messageCopy`, behind
//! `kubectl logs` over websockets and the upstream e2e test) drops the data of a read that also
//! returns EOF, and Go's chunked-body reader returns both when the last chunk and the body's
//! end arrive in one TLS record. The kubelet (Go's server) writes them apart; so does this.
//! Costs one extra poll per chunk, and a TLS record per chunk as a follower gets anyway.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

pub struct FlushEach<S> {
    inner: S,
    /// An item was just handed out: the next poll is pending once.
    just_yielded: bool,
}

impl<S> FlushEach<S> {
    pub fn new(inner: S) -> Self {
        FlushEach {
            inner,
            just_yielded: false,
        }
    }
}

impl<S: Stream + Unpin> Stream for FlushEach<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        if self.just_yielded {
            self.just_yielded = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(item)) => {
                self.just_yielded = true;
                Poll::Ready(Some(item))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn every_item_is_followed_by_one_pending_poll_and_nothing_is_lost() {
        let mut s = FlushEach::new(futures::stream::iter([1, 2]));
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut polls = Vec::new();
        loop {
            match s.poll_next_unpin(&mut cx) {
                Poll::Ready(Some(i)) => polls.push(Some(i)),
                Poll::Ready(None) => break,
                Poll::Pending => polls.push(None),
            }
        }
        assert_eq!(polls, [Some(1), None, Some(2), None]);
    }
}
