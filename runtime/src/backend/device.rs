//! Where a variant's sessions run: `cpu` or `cuda:N`, as configs and snapshots write it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a variant runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Device {
    /// The CPU.
    #[default]
    Cpu,
    /// NVIDIA GPU `N`, as CUDA numbers them.
    Cuda(u32),
}

impl Device {
    /// As configs and snapshots write it: `cpu`, `cuda:0`.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// The GPU's index, on a GPU.
    pub fn cuda_index(&self) -> Option<u32> {
        match self {
            Device::Cpu => None,
            Device::Cuda(index) => Some(*index),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(index) => write!(f, "cuda:{index}"),
        }
    }
}

impl FromStr for Device {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("device `{s}`: expected `cpu`, `cuda` or `cuda:N`");
        match s.trim() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            other => {
                let index = other.strip_prefix("cuda:").ok_or_else(bad)?;
                index.parse().map(Device::Cuda).map_err(|_| bad())
            }
        }
    }
}

impl TryFrom<String> for Device {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Device> for String {
    fn from(device: Device) -> String {
        device.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_read_and_write_as_configs_name_them() {
        for (text, device) in [("cpu", Device::Cpu), ("cuda:0", Device::Cuda(0)), ("cuda:3", Device::Cuda(3))] {
            assert_eq!(text.parse::<Device>(), Ok(device));
            assert_eq!(device.to_string(), text);
        }
        assert_eq!("cuda".parse::<Device>(), Ok(Device::Cuda(0)));
        for bad in ["gpu", "cuda:", "cuda:-1", "cuda:x", "tpu:0"] {
            let error = bad.parse::<Device>().unwrap_err();
            assert!(error.contains("expected `cpu`, `cuda` or `cuda:N`"), "{error}");
        }
        let json: Device = serde_json::from_str(r#""cuda:1""#).unwrap();
        assert_eq!((json, serde_json::to_string(&json).unwrap()), (Device::Cuda(1), r#""cuda:1""#.to_string()));
        assert!(serde_json::from_str::<Device>(r#""mps""#).is_err());
    }
}
