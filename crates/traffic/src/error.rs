//! Errors in stream, generator and sink definitions. Each names the value that is wrong and,
//! where there is one, what to ask for instead; they are found when a generator or sink is
//! built, before any frame is sent.

/// A bad stream, generator or sink definition.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Frame size below what the stream's headers and signature need.
    #[error(
        "stream {stream}: frame size {size} is below the {min} bytes (FCS included) an \
         {family}/UDP frame with the 18-byte signature needs; ask for at least {min}"
    )]
    FrameTooSmall {
        /// Stream id.
        stream: u32,
        /// The asked size.
        size: u16,
        /// The smallest size that works.
        min: u16,
        /// "IPv4" or "IPv6", with a VLAN tag if any.
        family: &'static str,
    },
    /// Frame size above the MTU allows.
    #[error(
        "stream {stream}: frame size {size} exceeds MTU {mtu} + 18 (Ethernet header and FCS) \
         = {max}; ask for at most {max} or raise the MTU"
    )]
    FrameTooLarge {
        /// Stream id.
        stream: u32,
        /// The asked size.
        size: u16,
        /// The stream's MTU.
        mtu: u16,
        /// The largest size the MTU allows.
        max: u16,
    },
    /// Frame size beyond a packet slot.
    #[error(
        "stream {stream}: frame size {size} does not fit a packet slot; at most {max} bytes \
         (FCS included) are supported"
    )]
    FrameBeyondSlot {
        /// Stream id.
        stream: u32,
        /// The asked size.
        size: u16,
        /// The largest size a slot holds.
        max: u16,
    },
    /// IMIX asked for an IPv6 stream.
    #[error(
        "stream {stream}: IMIX's 64-byte frames cannot carry IPv6/UDP and the signature \
         (at least {min} bytes); use fixed frame sizes for IPv6 streams"
    )]
    ImixIpv6 {
        /// Stream id.
        stream: u32,
        /// The smallest IPv6 frame.
        min: u16,
    },
    /// Source and destination of different families.
    #[error("stream {stream}: source {src} and destination {dst} are not of one IP family")]
    MixedFamilies {
        /// Stream id.
        stream: u32,
        /// Source address.
        src: std::net::IpAddr,
        /// Destination address.
        dst: std::net::IpAddr,
    },
    /// An address sweep that leaves its prefix or the low 32 bits.
    #[error(
        "stream {stream}: {what} sweep of {count} addresses from {start} does not stay \
         within {within}; start lower, use fewer flows or a shorter prefix"
    )]
    AddrSweep {
        /// Stream id.
        stream: u32,
        /// "source" or "destination".
        what: &'static str,
        /// First address.
        start: std::net::IpAddr,
        /// Addresses asked.
        count: u32,
        /// The prefix (or "the low 32 bits of the address") it must stay in.
        within: String,
    },
    /// A port sweep past 65535.
    #[error(
        "stream {stream}: {what} port sweep of {count} ports from {start} passes 65535; \
         start lower or use fewer ports"
    )]
    PortSweep {
        /// Stream id.
        stream: u32,
        /// "source" or "destination".
        what: &'static str,
        /// First port.
        start: u16,
        /// Ports asked.
        count: u32,
    },
    /// A sweep of zero addresses or ports.
    #[error("stream {stream}: the {what} sweep has 0 entries; use at least 1")]
    EmptySweep {
        /// Stream id.
        stream: u32,
        /// Which sweep.
        what: &'static str,
    },
    /// A prefix length longer than the family's addresses.
    #[error("stream {stream}: prefix length {len} is longer than the {bits}-bit addresses")]
    PrefixLen {
        /// Stream id.
        stream: u32,
        /// The asked length.
        len: u8,
        /// Address bits.
        bits: u8,
    },
    /// A VLAN id outside 1..=4094.
    #[error("stream {stream}: VLAN id {vid} is outside 1..=4094")]
    Vlan {
        /// Stream id.
        stream: u32,
        /// The asked id.
        vid: u16,
    },
    /// A rate that is not a positive finite number within range.
    #[error("rate {pps} pps must be a positive number of at most 1e9 pps")]
    BadRate {
        /// The asked rate.
        pps: f64,
    },
    /// Two streams with one id.
    #[error("stream id {id} is used twice; give every stream its own id")]
    DuplicateStream {
        /// The id.
        id: u32,
    },
    /// A stream id too large for the sink's direct-indexed table.
    #[error("stream id {id} is above {max}; number streams from 0")]
    StreamIdTooLarge {
        /// The id.
        id: u32,
        /// The largest id the sink takes.
        max: u32,
    },
    /// A stream id the generator or sink does not have.
    #[error("no stream has id {id}")]
    UnknownStream {
        /// The id.
        id: u32,
    },
    /// More streams than one generator or sink handles.
    #[error("{count} streams are more than the {max} one generator or sink handles; split them")]
    TooManyStreams {
        /// Streams given.
        count: usize,
        /// The most allowed.
        max: usize,
    },
    /// No stream at all.
    #[error("no streams were given; define at least one")]
    NoStreams,
    /// A sink setting out of range.
    #[error("sink: {what} = {value} is out of range ({range})")]
    SinkSetting {
        /// Which setting.
        what: &'static str,
        /// The asked value.
        value: u64,
        /// What is allowed.
        range: &'static str,
    },
}
