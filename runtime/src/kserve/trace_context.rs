//! The caller's trace context, read from a call's headers (gRPC metadata or HTTP), so
//! that the request span continues the caller's trace: its parent is the caller's
//! span. With feature `otel`, OpenTelemetry's global propagator reads the headers
//! (W3C `traceparent` and `tracestate` once the application sets
//! `TraceContextPropagator`; the default propagator reads nothing); without it, calls
//! start traces of their own.

use tonic::codegen::http::HeaderMap;

/// A call's remote parent span, if its headers carried one.
#[derive(Clone, Debug, Default)]
pub struct RemoteParent {
    #[cfg(feature = "otel")]
    context: Option<opentelemetry::Context>,
}

impl RemoteParent {
    /// The parent the headers name, through the global propagator.
    #[cfg(feature = "otel")]
    pub fn from_headers(headers: &HeaderMap) -> RemoteParent {
        let context = opentelemetry::global::get_text_map_propagator(|propagator| {
            // Most calls carry no trace: they cost one header lookup per field read.
            let carried = propagator.fields().any(|field| headers.contains_key(field));
            carried.then(|| propagator.extract(&Headers(headers)))
        });
        RemoteParent { context }
    }

    /// No parent: without feature `otel`, headers are not read.
    #[cfg(not(feature = "otel"))]
    pub fn from_headers(_: &HeaderMap) -> RemoteParent {
        RemoteParent::default()
    }

    /// Runs `submit` with the remote parent as the current OpenTelemetry context: a
    /// request span made there, outside any span of this process, takes it as its
    /// parent (as `tracing-opentelemetry` parents a span made outside any other).
    pub(super) fn in_scope<T>(&self, submit: impl FnOnce() -> T) -> T {
        #[cfg(feature = "otel")]
        if let Some(context) = &self.context {
            let _attached = context.clone().attach();
            return submit();
        }
        submit()
    }
}

/// Header lookups for the propagator.
#[cfg(feature = "otel")]
struct Headers<'a>(&'a HeaderMap);

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key)?.to_str().ok()
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|key| key.as_str()).collect()
    }
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use opentelemetry::trace::TraceContextExt;
    use opentelemetry_sdk::propagation::TraceContextPropagator;

    use super::*;

    #[test]
    fn a_traceparent_becomes_the_current_context_while_the_request_is_submitted() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let mut headers = HeaderMap::new();
        assert!(RemoteParent::from_headers(&headers).context.is_none(), "no header, nothing read");
        headers.insert("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".parse().unwrap());
        let parent = RemoteParent::from_headers(&headers);
        let seen = parent.in_scope(|| opentelemetry::Context::current().span().span_context().clone());
        assert_eq!(seen.trace_id().to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(seen.span_id().to_string(), "b7ad6b7169203331");
        assert!(seen.is_remote() && seen.is_sampled());
        let after = opentelemetry::Context::current().span().span_context().clone();
        assert!(!after.is_valid(), "the caller's context is current only while it submits");
    }
}
