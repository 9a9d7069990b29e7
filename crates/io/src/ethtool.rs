//! The one ethtool request vrhost makes: how many queues a device has.
//!
//! Why: an AF_XDP socket binds to one queue, so a port may not ask for more than the device
//! has; and an AF_PACKET port spreads its receive over sockets by the receiving CPU only
//! when the device itself spreads receive over that many CPUs (see `crate::afpacket`).

/// A device's queues (`ETHTOOL_GCHANNELS`), combined channels counted in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channels {
    /// Receive queues.
    pub rx: u32,
    /// Transmit queues.
    pub tx: u32,
}

/// How many queues `ifname` has, or `None` if the driver does not say.
pub fn channels(ifname: &str) -> Option<Channels> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolChannels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    let mut ifr = crate::link::ifreq(ifname)?;
    ifr.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast();
    // The ifreq's data points to a live ethtool_channels (the command the kernel reads
    // first), alive for the call.
    crate::link::ifreq_ioctl(libc::SIOCETHTOOL, &mut ifr).ok()?;
    let c = Channels {
        rx: ch.rx_count + ch.combined_count,
        tx: ch.tx_count + ch.combined_count,
    };
    (c.rx.max(c.tx) > 0).then_some(c)
}
