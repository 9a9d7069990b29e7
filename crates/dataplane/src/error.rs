//! Control-side errors: each names what was wrong.

use vrhost_fib::FibError;

/// A rejected data-plane change. Nothing already running is changed by a rejected call.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DpError {
    /// A VR of that name exists.
    #[error("virtual router {0:?} already exists")]
    VrExists(String),
    /// No VR of that name.
    #[error("no virtual router named {0:?}")]
    NoVr(String),
    /// A VIF of that name exists in the VR.
    #[error("virtual router {vr:?} already has an interface {vif:?}")]
    VifExists {
        /// The VR.
        vr: String,
        /// The VIF.
        vif: String,
    },
    /// No such VIF.
    #[error("virtual router {vr:?} has no interface {vif:?}")]
    NoVif {
        /// The VR.
        vr: String,
        /// The VIF.
        vif: String,
    },
    /// No such port.
    #[error("no port {0}")]
    NoPort(u16),
    /// Worker index out of range or already taken.
    #[error("worker {index}: {reason}")]
    Worker {
        /// The index asked for.
        index: usize,
        /// Why it cannot be used.
        reason: &'static str,
    },
    /// A configuration field is out of range.
    #[error("{what}: field {field}: {reason}")]
    BadField {
        /// The VR or VIF.
        what: String,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The VIF's demux key clashes with another VIF.
    #[error("interface {vif:?} of {vr:?}: {reason}")]
    Demux {
        /// The VR.
        vr: String,
        /// The VIF.
        vif: String,
        /// The clash.
        reason: String,
    },
    /// Too many VRs or VIFs for 16-bit ids.
    #[error("too many {0} (at most 65535)")]
    TooMany(&'static str),
    /// A route for an interface address was refused.
    #[error("route for an interface address: {0}")]
    Fib(#[from] FibError),
}
