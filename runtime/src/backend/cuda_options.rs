//! The CUDA execution provider's settings that GPU users tune, per variant. Each left
//! unset keeps ONNX Runtime's own default, so a config says only what it changes (and
//! a variant's profile key changes only when it does).

use serde::{Deserialize, Serialize};

/// How cuDNN picks each convolution's algorithm the first time it meets an input shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConvAlgoSearch {
    /// Time every algorithm (ONNX Runtime's default): the fastest kernels, and the
    /// longest first run at each new shape.
    Exhaustive,
    /// cuDNN's own ranking, without timing: a short first run, kernels nearly as fast.
    Heuristic,
    /// The implicit-GEMM algorithm for every convolution: no search at all.
    Default,
}

/// Settings of the CUDA execution provider for a variant on `cuda:N`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CudaOptions {
    /// How cuDNN searches convolution algorithms at a new input shape
    /// (`cudnn_conv_algo_search`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conv_algo_search: Option<ConvAlgoSearch>,
    /// TF32 tensor cores for fp32 matrix products and convolutions (`use_tf32`): faster
    /// on Ampere and later, with a 10-bit mantissa inside the products.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tf32: Option<bool>,
    /// NHWC layout for the operators that have it (`prefer_nhwc`): tensor cores read it
    /// without transposes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefer_nhwc: Option<bool>,
    /// Let cuDNN's search use as much workspace as its fastest algorithm asks for
    /// (`cudnn_conv_use_max_workspace`); `false` caps it at 32 MB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conv_max_workspace: Option<bool>,
    /// Most device memory the session's arena takes, in MiB (`gpu_mem_limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit_mib: Option<u64>,
    /// Copy each batch's inputs into pinned host memory, kept from batch to batch, and
    /// hand the session those: the device then reads them directly, where from the
    /// batch's own memory the driver first copies them through a buffer of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_inputs: Option<bool>,
    /// Capture each batch size's run as a CUDA graph and replay it (`enable_cuda_graph`):
    /// one launch for the whole model in place of one per kernel. Batches are then run
    /// on device tensors kept per batch size (see `bound_runs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_graph: Option<bool>,
}

impl CudaOptions {
    /// Whether it changes none of ONNX Runtime's defaults.
    pub fn is_default(&self) -> bool {
        *self == CudaOptions::default()
    }

    /// Sets how cuDNN searches convolution algorithms.
    pub fn with_conv_algo_search(mut self, search: ConvAlgoSearch) -> Self {
        self.conv_algo_search = Some(search);
        self
    }

    /// Sets whether fp32 products use TF32 tensor cores.
    pub fn with_tf32(mut self, tf32: bool) -> Self {
        self.tf32 = Some(tf32);
        self
    }

    /// Sets whether operators prefer the NHWC layout.
    pub fn with_prefer_nhwc(mut self, nhwc: bool) -> Self {
        self.prefer_nhwc = Some(nhwc);
        self
    }

    /// Sets whether batch sizes' runs are captured as CUDA graphs.
    pub fn with_cuda_graph(mut self, graph: bool) -> Self {
        self.cuda_graph = Some(graph);
        self
    }

    /// The provider for device `index` with these settings.
    pub(crate) fn provider(&self, index: u32) -> ort::ep::CUDA {
        use ort::ep::cuda::ConvAlgorithmSearch;
        let mut cuda = ort::ep::CUDA::default().with_device_id(index as i32);
        if let Some(search) = self.conv_algo_search {
            cuda = cuda.with_conv_algorithm_search(match search {
                ConvAlgoSearch::Exhaustive => ConvAlgorithmSearch::Exhaustive,
                ConvAlgoSearch::Heuristic => ConvAlgorithmSearch::Heuristic,
                ConvAlgoSearch::Default => ConvAlgorithmSearch::Default,
            });
        }
        if let Some(tf32) = self.tf32 {
            cuda = cuda.with_tf32(tf32);
        }
        if let Some(nhwc) = self.prefer_nhwc {
            cuda = cuda.with_prefer_nhwc(nhwc);
        }
        if let Some(max) = self.conv_max_workspace {
            cuda = cuda.with_conv_max_workspace(max);
        }
        if let Some(graph) = self.cuda_graph {
            cuda = cuda.with_cuda_graph(graph);
        }
        if let Some(mib) = self.memory_limit_mib {
            cuda = cuda.with_memory_limit(usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX));
        }
        cuda
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_names_only_what_it_changes() {
        let options: CudaOptions =
            serde_json::from_str(r#"{"conv_algo_search": "heuristic", "tf32": false, "memory_limit_mib": 4096}"#)
                .unwrap();
        assert_eq!(options.conv_algo_search, Some(ConvAlgoSearch::Heuristic));
        assert_eq!((options.tf32, options.prefer_nhwc), (Some(false), None));
        assert!(!options.is_default() && CudaOptions::default().is_default());
        // Unset settings stay out of the JSON a profile is keyed by.
        let json = serde_json::to_string(&CudaOptions::default().with_prefer_nhwc(true)).unwrap();
        assert_eq!(json, r#"{"prefer_nhwc":true}"#);
        let unknown = serde_json::from_str::<CudaOptions>(r#"{"cudnn_benchmark": true}"#).unwrap_err();
        assert!(unknown.to_string().contains("unknown field"), "{unknown}");
        let bad = serde_json::from_str::<CudaOptions>(r#"{"conv_algo_search": "fastest"}"#).unwrap_err();
        assert!(bad.to_string().contains("exhaustive"), "{bad}");
    }
}
