//! What can go wrong opening an AF_PACKET port. Every message names the interface, and the
//! queue and system call when one failed.

/// Opening a [`super::PacketPort`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    /// No interface of that name in the calling thread's network namespace.
    #[error("AF_PACKET port: no interface named {ifname:?} in this network namespace")]
    NoInterface {
        /// The name asked for.
        ifname: String,
    },
    /// The interface is down: a fanout group can only be joined by a running socket.
    #[error("AF_PACKET port on {ifname:?}: the interface is down (bring it up first)")]
    Down {
        /// The interface.
        ifname: String,
    },
    /// `queues` was 0.
    #[error("AF_PACKET port on {ifname:?}: needs at least one queue, got 0")]
    NoQueues {
        /// The interface.
        ifname: String,
    },
    /// A [`super::PacketOptions`] field is out of range.
    #[error("AF_PACKET port on {ifname:?}: option {option} = {value}: {reason}")]
    BadOption {
        /// The interface.
        ifname: String,
        /// The field.
        option: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },
    /// A system call failed while setting up a queue's sockets.
    #[error("AF_PACKET port on {ifname:?}, queue {queue}: {call} failed: {source}")]
    Sys {
        /// The interface.
        ifname: String,
        /// The queue being set up.
        queue: u32,
        /// The call, with the option it set (`setsockopt(PACKET_RX_RING)`).
        call: &'static str,
        /// The error the kernel returned.
        source: std::io::Error,
    },
}
