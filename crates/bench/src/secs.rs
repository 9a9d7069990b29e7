//! Serde for `Duration` as a number of seconds (`f64`), so that JSON records read `"duration_s":
//! 60.0` rather than serde's default `{"secs": 60, "nanos": 0}`. Seconds are what people and
//! plotting scripts expect; `f64` keeps nanoseconds exact up to about 100 days.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer, de::Error};

pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let secs = f64::deserialize(d)?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| D::Error::custom(format!("duration {secs} s is negative or not finite")))
}

/// The same for `Option<Duration>` (`null` when absent).
pub(crate) mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        match Option::<f64>::deserialize(d)? {
            None => Ok(None),
            Some(secs) => Duration::try_from_secs_f64(secs).map(Some).map_err(|_| {
                D::Error::custom(format!("duration {secs} s is negative or not finite"))
            }),
        }
    }
}
