//! Offloads: make the lab's veths carry what a wire would — MTU-sized frames with real
//! checksums and in-band VLAN tags — in both directions.
//!
//! Why: a router under test must see, and be judged on, the frames a NIC would give it.
//! Left at their defaults, veths would hand it 64 KB TCP "frames" (TSO/GSO pass straight
//! through a veth), frames whose L4 checksum is still to be filled in (tx checksum offload,
//! `CHECKSUM_PARTIAL`), VLAN tags outside the frame bytes (tx/rx VLAN offload), and on the
//! receiving side the kernel would *trust* every checksum (veth marks frames from a peer
//! without `rx` checksum offload off as `CHECKSUM_UNNECESSARY`), so a router that corrupts
//! checksums would still pass every TCP test. So the lab turns off, on all four veth ends
//! (`p0`, `p1`, `a0`, `b0`): rx and tx checksum offload, TSO, GSO, GRO, rx/tx VLAN offload.
//!
//! What was found on kernel 6.18 (and why the hosts' own interfaces are not touched): the
//! hosts' `eth0` are macvlans, and macvlan keeps SG, HW_CSUM and the software GSO features
//! always on (`ALWAYS_ON_OFFLOADS`); `ethtool -K eth0 tso off tx off` is accepted but changes
//! nothing. That is harmless: a macvlan transmits through its lower device, and the lower
//! (`a0`/`b0`, offloads off) segments and checksums in software (`validate_xmit_skb`) before
//! the frame enters the veth. A test captures on the router port during an iperf3 run and
//! checks exactly that: every frame ≤ 1514 bytes with a correct TCP checksum.
//!
//! This uses the legacy `SIOCETHTOOL` commands (`ETHTOOL_S{RXCSUM,TXCSUM,TSO,GSO,GRO,FLAGS}`)
//! directly, from a thread inside the namespace, so no `ethtool` binary is needed (the VM
//! this was written on has one; CI images often do not). `gso_max_size`/`gso_max_segs`
//! via `ip link` would only shrink GSO, not turn checksum offload off, so they are no
//! substitute.

use std::io;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GRXCSUM: u32 = 0x14;
const ETHTOOL_SRXCSUM: u32 = 0x15;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_SFLAGS: u32 = 0x26;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETH_FLAG_TXVLAN: u32 = 1 << 7;
const ETH_FLAG_RXVLAN: u32 = 1 << 8;

/// The offload state of one interface (true = on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Offloads {
    /// Receive checksum offload (`rx`): on a veth, "trust the peer's checksums".
    pub rx_csum: bool,
    /// Transmit checksum offload (`tx`).
    pub tx_csum: bool,
    /// TCP segmentation offload (`tso`).
    pub tso: bool,
    /// Generic segmentation offload (`gso`).
    pub gso: bool,
    /// Generic receive offload (`gro`).
    pub gro: bool,
    /// Receive VLAN offload (`rxvlan`).
    pub rx_vlan: bool,
    /// Transmit VLAN offload (`txvlan`).
    pub tx_vlan: bool,
}

impl Offloads {
    /// Whether everything the lab turns off is off.
    pub fn all_off(&self) -> bool {
        *self == Offloads::default()
    }
}

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

struct Sock(libc::c_int);

impl Drop for Sock {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this struct owns.
        unsafe { libc::close(self.0) };
    }
}

fn sock() -> io::Result<Sock> {
    // SAFETY: plain socket(2); the descriptor is owned by `Sock`.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Sock(fd))
}

fn ethtool(s: &Sock, ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    if ifname.len() >= libc::IFNAMSIZ || ifname.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    let mut v = EthtoolValue { cmd, data };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: (&raw mut v).cast(),
        _pad: [0; 16],
    };
    for (d, b) in req.name.iter_mut().zip(ifname.bytes()) {
        *d = b as libc::c_char;
    }
    // SAFETY: SIOCETHTOOL reads the name and the pointer from `req` and reads/writes the
    // `ethtool_value` it points to; both live on this stack frame for the whole call.
    let rc = unsafe { libc::ioctl(s.0, SIOCETHTOOL as _, &raw mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.data)
}

/// Read `ifname`'s offload state (in the calling thread's namespace).
pub fn get(ifname: &str) -> io::Result<Offloads> {
    let s = sock()?;
    let g = |cmd| ethtool(&s, ifname, cmd, 0).map(|v| v != 0);
    let flags = ethtool(&s, ifname, ETHTOOL_GFLAGS, 0)?;
    Ok(Offloads {
        rx_csum: g(ETHTOOL_GRXCSUM)?,
        tx_csum: g(ETHTOOL_GTXCSUM)?,
        tso: g(ETHTOOL_GTSO)?,
        gso: g(ETHTOOL_GGSO)?,
        gro: g(ETHTOOL_GGRO)?,
        rx_vlan: flags & ETH_FLAG_RXVLAN != 0,
        tx_vlan: flags & ETH_FLAG_TXVLAN != 0,
    })
}

/// Turn GRO on or off on `ifname` (in the calling thread's namespace); returns the state
/// afterwards. A veth with GRO on runs a NAPI for what its peer sends, which is what lets
/// the peer's XDP transmit (`ndo_xdp_xmit`) hand it frames; GRO only changes how this end
/// receives, so the frames it sends stay wire-like.
pub fn set_gro(ifname: &str, on: bool) -> io::Result<bool> {
    let s = sock()?;
    ethtool(&s, ifname, ETHTOOL_SGRO, u32::from(on))?;
    Ok(ethtool(&s, ifname, ETHTOOL_GGRO, 0)? != 0)
}

/// Turn off every offload in [`Offloads`] on `ifname` (in the calling thread's namespace)
/// and return the state afterwards, which the caller should check: a device may accept a
/// request and keep a feature on (macvlan does).
pub fn disable(ifname: &str) -> io::Result<Offloads> {
    let s = sock()?;
    for cmd in [
        ETHTOOL_STSO,
        ETHTOOL_SGSO,
        ETHTOOL_SGRO,
        ETHTOOL_STXCSUM,
        ETHTOOL_SRXCSUM,
    ] {
        ethtool(&s, ifname, cmd, 0)?;
    }
    let flags = ethtool(&s, ifname, ETHTOOL_GFLAGS, 0)?;
    let want = flags & !(ETH_FLAG_RXVLAN | ETH_FLAG_TXVLAN);
    if want != flags {
        ethtool(&s, ifname, ETHTOOL_SFLAGS, want)?;
    }
    drop(s);
    get(ifname)
}
