//! Opening a configured port with its backend, and the queues the workers get from it.
//!
//! `backend = "auto"` tries AF_XDP first (native attach, then generic; zero-copy bind, then
//! copy) and falls back to AF_PACKET when XDP cannot be used on the interface, saying so in
//! the log: a router should come up on any interface, and tell its operator how.

use std::sync::Arc;

use anyhow::Context;
use serde_json::{Value, json};
use tracing::warn;
use vrhost_control::config::{Backend, PortSpec, XdpMode};
use vrhost_dataplane::Pool;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_io::afpacket::{PacketOptions, PacketPort};
use vrhost_io::afxdp::{AttachMode, XdpOptions, XdpPort};

/// An open port.
#[derive(Debug)]
pub(crate) enum OpenPort {
    /// AF_XDP.
    Xdp(XdpPort),
    /// AF_PACKET.
    Packet(PacketPort),
}

impl OpenPort {
    /// Open `spec` with one queue per worker.
    pub(crate) fn open(
        spec: &PortSpec,
        workers: usize,
        pool: &Arc<Pool>,
    ) -> anyhow::Result<OpenPort> {
        let iface = spec.interface.get_ref();
        let queues = workers as u32;
        let xdp = |spec: &PortSpec| {
            let opts = XdpOptions {
                mode: spec.xdp_mode.map(|m| match m {
                    XdpMode::Native => AttachMode::Native,
                    XdpMode::Generic => AttachMode::Generic,
                }),
                zero_copy: spec.zero_copy,
                // A vector's worth per NAPI poll: one poll of the worker, one NAPI poll.
                busy_poll: spec
                    .busy_poll
                    .as_ref()
                    .is_some_and(|b| *b.get_ref())
                    .then_some(vrhost_dataplane::VECTOR as u16),
                ..XdpOptions::default()
            };
            XdpPort::open(iface, queues, pool, &opts)
        };
        let packet = || PacketPort::open(iface, queues, pool, &PacketOptions::default());
        let busy = spec.busy_poll.as_ref().is_some_and(|b| *b.get_ref());
        let port = match spec.backend {
            Backend::Afxdp => OpenPort::Xdp(xdp(spec).context("AF_XDP")?),
            Backend::Afpacket => OpenPort::Packet(packet().context("AF_PACKET")?),
            Backend::Auto => match xdp(spec) {
                Ok(p) => OpenPort::Xdp(p),
                Err(e) => {
                    warn!("{iface}: AF_XDP unavailable ({e}); using AF_PACKET");
                    OpenPort::Packet(packet().context("AF_PACKET")?)
                }
            },
        };
        if busy
            && let OpenPort::Xdp(p) = &port
            && !p.busy_polling()
        {
            warn!(
                "{iface}: busy_poll has no effect: the sockets are bound in copy mode, and Linux \
                 gives only zero-copy AF_XDP sockets a NAPI to busy-poll"
            );
        }
        Ok(port)
    }

    /// The queues, one (rx, tx) pair per worker, in worker order.
    pub(crate) fn take_queues(&mut self) -> Vec<(Box<dyn RxQueue>, Box<dyn TxQueue>)> {
        match self {
            OpenPort::Xdp(p) => boxed(p.take_queues()),
            OpenPort::Packet(p) => boxed(p.take_queues()),
        }
    }

    /// Backend and mode, for logs and `ctl status`.
    pub(crate) fn describe(&self) -> String {
        match self {
            OpenPort::Xdp(p) => {
                let (attach, bind) = p.mode();
                format!("afxdp {attach:?}/{bind:?}").to_lowercase()
            }
            OpenPort::Packet(_) => "afpacket".into(),
        }
    }

    /// The kernel's counters for the port's sockets.
    pub(crate) fn stats_json(&self) -> Value {
        match self {
            OpenPort::Xdp(p) => json!(format!("{:?}", p.stats())),
            OpenPort::Packet(p) => json!(format!("{:?}", p.stats())),
        }
    }
}

fn boxed<R: RxQueue + 'static, T: TxQueue + 'static>(
    queues: Vec<(R, T)>,
) -> Vec<(Box<dyn RxQueue>, Box<dyn TxQueue>)> {
    queues
        .into_iter()
        .map(|(r, t)| {
            (
                Box::new(r) as Box<dyn RxQueue>,
                Box::new(t) as Box<dyn TxQueue>,
            )
        })
        .collect()
}
