//! Opening a configured port with its backend, and the queues the workers get from it.
//!
//! Each queue's transmit side goes through `vrhost_io::txpath` unless `tx = "socket"`: the
//! device's XDP transmit while the device takes it, else the socket's own. `tx = "auto"`
//! (the default) does that on AF_XDP ports attached in driver mode with copy-mode sockets
//! (veth, and NICs without zero-copy) and keeps the socket's transmit elsewhere (see
//! `OpenPort::open`).
//!
//! `backend = "auto"` tries AF_XDP first (native attach, then generic; zero-copy bind, then
//! copy) and falls back to AF_PACKET when XDP cannot be used on the interface, saying so in
//! the log: a router should come up on any interface, and tell its operator how.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Context;
use serde_json::{Value, json};
use tracing::warn;
use vrhost_control::config::{Backend, FanoutSpec, PortSpec, TxSpec, XdpMode};
use vrhost_dataplane::Pool;
use vrhost_dataplane::port::PortId;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_io::afpacket::{FanoutBy, PacketOptions, PacketPort};
use vrhost_io::afxdp::{AttachMode, BindMode, XdpOptions, XdpPort};
use vrhost_io::quickpath::Quickpath;
use vrhost_io::txpath::{TxChoice, TxPath, TxPathState};
use vrhost_io::xdptx::{self, XdpTxError};

/// One worker's queues of a port.
pub(crate) type Queues = (Box<dyn RxQueue>, Box<dyn TxQueue>);

/// An open port: its sockets and its queues' transmit paths.
#[derive(Debug)]
pub(crate) struct OpenPort {
    sock: Sock,
    iface: String,
    tx: TxChoice,
    tx_paths: Vec<Arc<TxPathState>>,
    /// Its XDP program is the quickpath's (frames it receives may be forwarded there).
    quickpath: bool,
}

/// The port's sockets.
#[derive(Debug)]
enum Sock {
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
        quickpath: Option<&Arc<Quickpath>>,
    ) -> anyhow::Result<OpenPort> {
        let quickpath = quickpath.filter(|_| spec.wants_quickpath());
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
            XdpPort::open_with(iface, queues, pool, &opts, quickpath)
        };
        let packet = || {
            let fanout = match spec.fanout.as_ref().map(|f| *f.get_ref()) {
                None | Some(FanoutSpec::Auto) => FanoutBy::for_device(iface, queues as usize),
                Some(FanoutSpec::Hash) => FanoutBy::Hash,
                Some(FanoutSpec::Cpu) => FanoutBy::Cpu,
            };
            let opts = PacketOptions {
                fanout,
                ..PacketOptions::default()
            };
            PacketPort::open(iface, queues, pool, &opts)
        };
        let busy = spec.busy_poll.as_ref().is_some_and(|b| *b.get_ref());
        let tx = match spec.tx {
            TxSpec::Auto => TxChoice::Auto,
            TxSpec::Socket => TxChoice::Socket,
            TxSpec::Xdp => TxChoice::Xdp,
        };
        // `tx = "xdp"` on a device that does not take it stops the start here, before any
        // socket is made.
        if tx == TxChoice::Xdp {
            let ifindex = vrhost_io::bpf::ifindex(iface).context("tx = \"xdp\"")?;
            let (ok, features) = xdptx::usable(ifindex).context("tx = \"xdp\": xdp-features")?;
            if !ok {
                return Err(XdpTxError::NoXmit {
                    ifname: iface.clone(),
                    features,
                })
                .context("port.tx");
            }
        }
        let sock = match spec.backend {
            Backend::Afxdp => Sock::Xdp(xdp(spec).context("AF_XDP")?),
            Backend::Afpacket => Sock::Packet(packet().context("AF_PACKET")?),
            Backend::Auto => match xdp(spec) {
                Ok(p) => Sock::Xdp(p),
                Err(e) => {
                    warn!("{iface}: AF_XDP unavailable ({e}); using AF_PACKET");
                    if quickpath.is_some() {
                        warn!("{iface}: no quickpath on an AF_PACKET port");
                    }
                    Sock::Packet(packet().context("AF_PACKET")?)
                }
            },
        };
        // What `auto` means for this port. XDP transmit only where vrhost's own program is
        // attached in driver mode and the socket copies: a zero-copy socket transmits from
        // the pool with no copy and no skb (XDP transmit would only cost more), and a NIC
        // driver allocates its XDP transmit rings only while an XDP program is attached in
        // driver mode — some advertise `ndo_xdp_xmit` without one and then drop what they
        // are given (ixgbe answers ENXIO). So an AF_PACKET port, or an AF_XDP port attached
        // in generic mode, transmits by XDP only when asked (`tx = "xdp"`).
        let tx = match &sock {
            Sock::Xdp(p) if p.mode() == (AttachMode::Native, BindMode::Copy) => tx,
            _ if tx == TxChoice::Auto => TxChoice::Socket,
            _ => tx,
        };
        let port = OpenPort {
            quickpath: quickpath.is_some() && matches!(sock, Sock::Xdp(_)),
            sock,
            iface: iface.clone(),
            tx,
            tx_paths: Vec::new(),
        };
        if busy
            && let Sock::Xdp(p) = &port.sock
            && !p.busy_polling()
        {
            warn!(
                "{iface}: busy_poll has no effect: the sockets are bound in copy mode, and Linux \
                 gives only zero-copy AF_XDP sockets a NAPI to busy-poll"
            );
        }
        Ok(port)
    }

    /// The queues, one (rx, tx) pair per worker, in worker order, each transmit queue on
    /// its path (see the module doc). Call on a thread in the port's namespace.
    pub(crate) fn take_queues(&mut self) -> anyhow::Result<Vec<Queues>> {
        let queues = match &mut self.sock {
            Sock::Xdp(p) => boxed(p.take_queues()),
            Sock::Packet(p) => boxed(p.take_queues()),
        };
        let mut out = Vec::with_capacity(queues.len());
        for (r, t) in queues {
            let t = match TxPath::wrap(&self.iface, t, self.tx) {
                Ok((t, state)) => {
                    self.tx_paths.extend(state);
                    t
                }
                Err((t, e)) if self.tx == TxChoice::Auto => {
                    warn!(
                        "{}: XDP transmit unavailable ({e}); using the socket's",
                        self.iface
                    );
                    t
                }
                Err((_, e)) => return Err(e).context("port.tx = \"xdp\""),
            };
            out.push((r, t));
        }
        Ok(out)
    }

    /// Put the port into `qp`: as an ingress if its XDP program is the quickpath's, and as
    /// an egress while its queues transmit by XDP. Call after [`OpenPort::take_queues`].
    pub(crate) fn join_quickpath(&self, qp: &Quickpath, id: PortId) -> anyhow::Result<()> {
        let Sock::Xdp(p) = &self.sock else {
            return Ok(());
        };
        if self.quickpath {
            qp.add_ingress(id, p.ifindex());
        }
        if let Some(tx) = self.tx_paths.first() {
            qp.add_egress(id, p.ifindex(), tx.clone())
                .with_context(|| format!("{}: quickpath egress", self.iface))?;
        }
        Ok(())
    }

    /// Backend, mode and transmit path, for logs and `ctl status`.
    pub(crate) fn describe(&self) -> String {
        let sock = match &self.sock {
            Sock::Xdp(p) => {
                let (attach, bind) = p.mode();
                format!("afxdp {attach:?}/{bind:?}").to_lowercase()
            }
            Sock::Packet(p) => match p.fanout() {
                Some(f) => format!("afpacket, fanout by {f:?}").to_lowercase(),
                None => "afpacket".into(),
            },
        };
        let xdp = self.xdp_queues();
        match (self.tx, self.tx_paths.len()) {
            (TxChoice::Socket, _) => format!("{sock}, tx socket"),
            (_, 0) => format!("{sock}, tx {}", self.tx_name()),
            (_, n) if xdp == n => format!("{sock}, tx xdp"),
            (_, _) if xdp == 0 => format!("{sock}, tx socket (device takes no XDP transmit now)"),
            (_, n) => format!("{sock}, tx xdp on {xdp} of {n} queues"),
        }
    }

    /// Queues transmitting by XDP now.
    fn xdp_queues(&self) -> usize {
        self.tx_paths
            .iter()
            .filter(|s| s.xdp.load(Ordering::Relaxed))
            .count()
    }

    fn tx_name(&self) -> &'static str {
        match self.tx {
            TxChoice::Auto => "auto",
            TxChoice::Socket => "socket",
            TxChoice::Xdp => "xdp",
        }
    }

    /// The kernel's counters for the port's sockets, and XDP transmit's.
    pub(crate) fn stats_json(&self) -> Value {
        let sock = match &self.sock {
            Sock::Xdp(p) => json!(format!("{:?}", p.stats())),
            Sock::Packet(p) => json!(format!("{:?}", p.stats())),
        };
        let sum = |f: fn(&TxPathState) -> u64| self.tx_paths.iter().map(|s| f(s)).sum::<u64>();
        json!({
            "socket": sock,
            "tx": self.tx_name(),
            "xdp_tx_queues": self.xdp_queues(),
            "xdp_tx_frames": sum(|s| s.xdp_counters.frames.get()),
            "xdp_tx_runs": sum(|s| s.xdp_counters.runs.get()),
            "xdp_tx_refused": sum(|s| s.xdp_counters.refused.get()),
            "xdp_tx_failed": sum(|s| s.xdp_counters.failed.get()),
            "xdp_tx_switches": sum(|s| s.switches.get()),
        })
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
