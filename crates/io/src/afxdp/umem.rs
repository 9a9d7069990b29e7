//! The UMEM: the packet pool's slot region registered with the kernel, once per pool.
//!
//! Frames are pool slots: the region from `Pool::region` is registered as is, with the
//! chunk size equal to `SLOT_SIZE` and no extra headroom, so UMEM address `i × SLOT_SIZE +
//! off` is byte `off` of slot `i`. A frame received on one port and sent out another keeps
//! its address; nothing is copied between the socket and the pool or between ports.
//!
//! The kernel ties a UMEM to the socket that registered it (`XDP_UMEM_REG`); every other
//! socket joins it by binding with `XDP_SHARED_UMEM` and naming a bound member's fd. Each
//! of our sockets serves its own (device, queue), so each gets its own fill and completion
//! rings (kernel ≥ 5.10) and the rings stay single-producer single-consumer.
//!
//! Why a process-wide registry keyed by pool: ports are opened one by one from a pool
//! (`XdpPort::open(…, &pool, …)`), and the pool type lives in a crate that knows nothing of
//! sockets. The registry finds the pool's live registration, or starts a new one when the
//! last member socket has gone (the kernel frees a UMEM with its last socket). Members are
//! held weakly: the registration never keeps a socket open.
//!
//! The kernel fixes the UMEM's mode at the first bind: later members inherit zero-copy or
//! copy and need-wakeup, and cannot ask for anything else (`EINVAL`). So the first port
//! opened on a pool decides the bind mode for all; a later port whose device cannot do it
//! fails with an error saying so (give it its own pool).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use vrhost_dataplane::Pool;

use super::BindMode;
use super::socket::Xsk;

/// One registration of a pool's region.
#[derive(Debug)]
pub(crate) struct Umem {
    pool: Arc<Pool>,
    state: Mutex<State>,
}

/// What the first bind decided, and who is bound.
#[derive(Debug, Default)]
pub(crate) struct State {
    members: Vec<Weak<Xsk>>,
    /// Set by the first successful bind.
    pub(crate) mode: Option<(BindMode, bool)>,
    /// The interface whose bind decided `mode` (for error messages).
    pub(crate) decided_by: String,
    /// Which registration this is (process-wide, from 1); 0 until the first bind.
    pub(crate) id: u64,
}

impl State {
    /// A bound member to name in `sxdp_shared_umem_fd`, kept alive while the caller holds
    /// it; `None` if the registration has no member left.
    pub(crate) fn member(&mut self) -> Option<Arc<Xsk>> {
        self.members.retain(|w| w.strong_count() > 0);
        self.members.iter().find_map(Weak::upgrade)
    }

    /// Record a newly bound member.
    pub(crate) fn join(&mut self, xsk: &Arc<Xsk>) {
        self.members.push(Arc::downgrade(xsk));
    }
}

static REGISTRY: Mutex<Vec<Weak<Umem>>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A new registration id (when a socket registers the region with the kernel).
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Umem {
    /// The pool's live registration, or a new one (registered with the kernel by the first
    /// socket that binds to it).
    pub(crate) fn for_pool(pool: &Arc<Pool>) -> Arc<Umem> {
        let mut reg = lock(&REGISTRY);
        reg.retain(|w| w.strong_count() > 0);
        if let Some(u) = reg
            .iter()
            .filter_map(Weak::upgrade)
            .find(|u| Arc::ptr_eq(&u.pool, pool))
        {
            return u;
        }
        let u = Arc::new(Umem {
            pool: pool.clone(),
            state: Mutex::new(State::default()),
        });
        reg.push(Arc::downgrade(&u));
        u
    }

    /// The pool whose region this is.
    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Lock the registration for a bind: binds to one UMEM happen one at a time, so the
    /// member named as shared fd stays bound and the first bind's mode is seen by the rest.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The `XDP_UMEM_REG` request for this pool's region.
    pub(crate) fn reg(&self) -> libc::xdp_umem_reg {
        let (addr, len) = self.pool.region();
        libc::xdp_umem_reg {
            addr: addr as u64,
            len: len as u64,
            chunk_size: vrhost_dataplane::SLOT_SIZE as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        }
    }
}
