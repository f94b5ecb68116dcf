//! A [`Policy`] as the host drives it: made from its parameters at `init` (or from
//! their defaults at the first call where the config has none), and its methods on
//! the JSON the ABI passes. What each export calls.

use super::{Error, Policy};
use crate::decision::PolicyOutput;
use crate::snapshot::Snapshot;

/// A policy module's one policy, made when the host first needs it.
pub struct Hosted<P: Policy> {
    policy: Option<P>,
}

impl<P: Policy> Default for Hosted<P> {
    fn default() -> Self {
        Hosted { policy: None }
    }
}

impl<P: Policy> Hosted<P> {
    /// `init` on JSON: makes the policy from the parameters; `{}` when it did, else
    /// `{"error": …}`.
    pub fn init_json(&mut self, parameters: &[u8]) -> Vec<u8> {
        super::install_host_logger();
        let made = serde_json::from_slice::<P::Parameters>(parameters).map_err(invalid_parameters).and_then(P::new);
        status_json(made.map(|policy| self.policy = Some(policy)))
    }

    /// `decide` on JSON: the snapshot in, the decision (or `{"error": …}`) out.
    pub fn decide_json(&mut self, snapshot: &[u8]) -> Vec<u8> {
        super::install_host_logger();
        let decided = serde_json::from_slice::<Snapshot>(snapshot)
            .map_err(|e| Error::from(format!("invalid snapshot: {e}")))
            .and_then(|snapshot| self.policy()?.decide(&snapshot));
        to_json(&match decided {
            Ok(decision) => PolicyOutput::Decision(decision),
            Err(error) => PolicyOutput::Error { error: error.into_message() },
        })
    }

    /// `save_state` as JSON (`null` for none).
    pub fn save_state_json(&mut self) -> Vec<u8> {
        to_json(&self.policy.as_mut().and_then(P::state))
    }

    /// `load_state` on JSON: `{}` when it took the state, else `{"error": …}`.
    pub fn load_state_json(&mut self, state: &[u8]) -> Vec<u8> {
        super::install_host_logger();
        let loaded = self.policy().and_then(|policy| {
            let Some(slot) = policy.state() else { return Ok(()) };
            *slot = serde_json::from_slice(state).map_err(|e| Error::from(format!("invalid saved state: {e}")))?;
            Ok(())
        });
        status_json(loaded)
    }

    /// The JSON Schema of the policy's parameters.
    pub fn parameters_schema_json() -> Vec<u8> {
        to_json(&schemars::schema_for!(P::Parameters))
    }

    /// The policy, made from the default parameters if `init` did not make it.
    pub fn policy(&mut self) -> Result<&mut P, Error> {
        let policy = match self.policy.take() {
            Some(policy) => policy,
            None => P::new(P::Parameters::default())?,
        };
        Ok(self.policy.insert(policy))
    }
}

/// The policy made from parameters written as JSON, decoded as the module decodes
/// the config's: for tests that state them as a config would.
pub fn configured<P: Policy>(parameters: serde_json::Value) -> Result<P, Error> {
    P::new(serde_json::from_value(parameters).map_err(invalid_parameters)?)
}

fn invalid_parameters(error: serde_json::Error) -> Error {
    Error::from(format!("invalid parameters: {error}"))
}

fn status_json(result: Result<(), Error>) -> Vec<u8> {
    match result {
        Ok(()) => b"{}".to_vec(),
        Err(error) => to_json(&PolicyOutput::Error { error: error.into_message() }),
    }
}

fn to_json(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|e| format!(r#"{{"error":"cannot encode: {e}"}}"#).into_bytes())
}
