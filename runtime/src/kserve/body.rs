//! The JSON of an HTTP inference request, read into types whose every collection is
//! bounded while it is read: a body of a few MiB cannot become gigabytes of parsed
//! values. Tensor data stays as its JSON text until its claim has been checked
//! (`tensors::from_json` reads it then); parameters are scalars, as the protocol
//! says.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::limits::MAX_RANK;
use super::params::ParamValue;

/// Most inputs or outputs a body may list while it is read; the server's
/// `max_request_tensors` is checked after.
const MAX_LISTED: usize = 4096;
/// Most parameters of a request, an input or an output.
pub const MAX_PARAMETERS: usize = 256;

/// An inference request.
#[derive(Debug, serde::Deserialize)]
pub(super) struct InferBody<'a> {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub parameters: Parameters,
    #[serde(borrow)]
    pub inputs: Bounded<InputBody<'a>, MAX_LISTED>,
    #[serde(default)]
    pub outputs: Bounded<OutputBody, MAX_LISTED>,
}

/// One input: its claim, and its data as JSON text or a part of the binary tail.
#[derive(Debug, serde::Deserialize)]
pub(super) struct InputBody<'a> {
    pub name: String,
    pub shape: Bounded<i64, MAX_RANK>,
    pub datatype: String,
    #[serde(default)]
    pub parameters: Parameters,
    #[serde(default, borrow)]
    pub data: Option<&'a RawValue>,
}

/// One output asked for.
#[derive(Debug, serde::Deserialize)]
pub(super) struct OutputBody {
    pub name: String,
    #[serde(default)]
    pub parameters: Parameters,
}

/// A list refused while it is read once it holds more than `N` items.
#[derive(Debug)]
pub(super) struct Bounded<T, const N: usize>(pub Vec<T>);

impl<T, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Bounded(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Bounded<T, N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for Items<T, N> {
            type Value = Bounded<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an array of at most {N} items")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    if items.len() == N {
                        return Err(de::Error::custom(format_args!("more than {N} items in one array")));
                    }
                    items.push(item);
                }
                Ok(Bounded(items))
            }
        }
        deserializer.deserialize_seq(Items(PhantomData))
    }
}

/// Parameters: scalar values by name, at most [`MAX_PARAMETERS`].
#[derive(Debug, Default)]
pub(super) struct Parameters(pub Vec<(String, ParamValue)>);

impl Parameters {
    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&ParamValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The boolean `key`, if given as one.
    pub fn flag(&self, key: &str) -> Option<bool> {
        match self.get(key) {
            Some(ParamValue::Bool(b)) => Some(*b),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Parameters {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Parameters;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an object of at most {MAX_PARAMETERS} parameters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parameters, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, ParamValue>()? {
                    if entries.len() == MAX_PARAMETERS {
                        return Err(de::Error::custom(format_args!("more than {MAX_PARAMETERS} parameters")));
                    }
                    entries.push((key, value));
                }
                Ok(Parameters(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Scalar;
        impl<'de> Visitor<'de> for Scalar {
            type Value = ParamValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a parameter: a boolean, a number or a string")
            }
            fn visit_bool<E>(self, v: bool) -> Result<ParamValue, E> {
                Ok(ParamValue::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<ParamValue, E> {
                Ok(ParamValue::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<ParamValue, E> {
                Ok(i64::try_from(v).map_or(ParamValue::UInt(v), ParamValue::Int))
            }
            fn visit_f64<E>(self, v: f64) -> Result<ParamValue, E> {
                Ok(ParamValue::Double(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<ParamValue, E> {
                Ok(ParamValue::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<ParamValue, E> {
                Ok(ParamValue::Str(v))
            }
        }
        deserializer.deserialize_any(Scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<InferBody<'_>, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn bodies_are_read_with_bounded_lists_and_scalar_parameters() {
        let body = parse(
            r#"{"id":"7","parameters":{"latency_ms":20,"binary_data_output":true},
                "inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]}],
                "outputs":[{"name":"y","parameters":{"binary_data":false}}]}"#,
        )
        .unwrap();
        assert_eq!(body.parameters.get("latency_ms"), Some(&ParamValue::Int(20)));
        assert_eq!(body.parameters.flag("binary_data_output"), Some(true));
        assert_eq!(body.inputs.0[0].shape.0, vec![2, 2]);
        assert_eq!(body.inputs.0[0].data.map(RawValue::get), Some("[[1,2],[3,4]]"));
        assert_eq!(body.outputs.0[0].parameters.flag("binary_data"), Some(false));

        let deep_shape =
            format!(r#"{{"inputs":[{{"name":"x","shape":[{}],"datatype":"FP32"}}]}}"#, ["1"; 33].join(","));
        assert!(parse(&deep_shape).unwrap_err().to_string().contains("more than 32 items"));
        let many: Vec<String> = (0..=MAX_PARAMETERS).map(|i| format!(r#""p{i}":1"#)).collect();
        let crowded = format!(r#"{{"parameters":{{{}}},"inputs":[]}}"#, many.join(","));
        assert!(parse(&crowded).unwrap_err().to_string().contains("more than 256 parameters"));
        let nested = r#"{"parameters":{"p":[1,2,3]},"inputs":[]}"#;
        assert!(parse(nested).unwrap_err().to_string().contains("a boolean, a number or a string"));
    }
}
