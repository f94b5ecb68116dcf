//! The CUDA provider's settings a search turns for a variant on a GPU: how cuDNN
//! searches its convolution algorithms, TF32, NHWC kernels, the search's workspace,
//! whether batches are staged in pinned memory, and whether runs are captured as CUDA
//! graphs. A config that leaves one unset
//! serves with its default, which is then the default setting's value.

use serde::{Deserialize, Serialize};

use modelless::backend::{ConvAlgoSearch, CudaOptions};

/// The CUDA provider's settings at one point of a GPU variant's space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaSetting {
    /// `conv_algo_search`.
    pub conv_algo_search: ConvAlgoSearch,
    /// `tf32`.
    pub tf32: bool,
    /// `prefer_nhwc`.
    pub prefer_nhwc: bool,
    /// `conv_max_workspace`.
    pub conv_max_workspace: bool,
    /// `pinned_inputs`.
    #[serde(default)]
    pub pinned_inputs: bool,
    /// `cuda_graph`.
    #[serde(default)]
    pub cuda_graph: bool,
}

/// The searches, in the order a point's number picks them.
pub const SEARCHES: [ConvAlgoSearch; 3] =
    [ConvAlgoSearch::Exhaustive, ConvAlgoSearch::Heuristic, ConvAlgoSearch::Default];

impl CudaSetting {
    /// What a config that sets none of them serves with: ONNX Runtime's own
    /// (`CUDAExecutionProviderInfo`: exhaustive search, TF32 on, NCHW kernels, as much
    /// workspace as the fastest algorithm asks for), batches read where they are, and
    /// no graphs.
    pub const DEFAULT: CudaSetting = CudaSetting {
        conv_algo_search: ConvAlgoSearch::Exhaustive,
        tf32: true,
        prefer_nhwc: false,
        conv_max_workspace: true,
        pinned_inputs: false,
        cuda_graph: false,
    };

    /// What `options` set, with the defaults for what they leave unset.
    pub fn of(options: &CudaOptions) -> Self {
        let default = CudaSetting::DEFAULT;
        CudaSetting {
            conv_algo_search: options.conv_algo_search.unwrap_or(default.conv_algo_search),
            tf32: options.tf32.unwrap_or(default.tf32),
            prefer_nhwc: options.prefer_nhwc.unwrap_or(default.prefer_nhwc),
            conv_max_workspace: options.conv_max_workspace.unwrap_or(default.conv_max_workspace),
            pinned_inputs: options.pinned_inputs.unwrap_or(default.pinned_inputs),
            cuda_graph: options.cuda_graph.unwrap_or(default.cuda_graph),
        }
    }

    /// Sets every one of its settings in `options`; the memory limit stays as it is.
    pub fn apply(&self, options: &mut CudaOptions) {
        options.conv_algo_search = Some(self.conv_algo_search);
        options.tf32 = Some(self.tf32);
        options.prefer_nhwc = Some(self.prefer_nhwc);
        options.conv_max_workspace = Some(self.conv_max_workspace);
        options.pinned_inputs = Some(self.pinned_inputs);
        options.cuda_graph = Some(self.cuda_graph);
    }

    /// The search as the config writes it.
    pub fn search_name(&self) -> &'static str {
        match self.conv_algo_search {
            ConvAlgoSearch::Exhaustive => "exhaustive",
            ConvAlgoSearch::Heuristic => "heuristic",
            ConvAlgoSearch::Default => "default",
        }
    }

    /// The settings in a few words, for progress lines and tables.
    pub fn brief(&self) -> String {
        let mut words = format!("cuDNN {}", self.search_name());
        let flags = [
            (self.tf32, "tf32"),
            (self.prefer_nhwc, "nhwc"),
            (!self.conv_max_workspace, "small-workspace"),
            (self.pinned_inputs, "pinned"),
            (self.cuda_graph, "graphs"),
        ];
        for (on, name) in flags {
            if on {
                words.push(' ');
                words.push_str(name);
            }
        }
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_options_read_as_onnx_runtimes_defaults_and_applying_sets_them_all() {
        assert_eq!(CudaSetting::of(&CudaOptions::default()), CudaSetting::DEFAULT);
        let configured = CudaOptions::default().with_conv_algo_search(ConvAlgoSearch::Heuristic).with_prefer_nhwc(true);
        let setting = CudaSetting::of(&configured);
        assert_eq!(
            (setting.conv_algo_search, setting.prefer_nhwc, setting.tf32),
            (ConvAlgoSearch::Heuristic, true, true)
        );
        let mut options = CudaOptions { memory_limit_mib: Some(2048), ..CudaOptions::default() };
        let chosen =
            CudaSetting { tf32: false, conv_max_workspace: false, pinned_inputs: true, cuda_graph: true, ..setting };
        chosen.apply(&mut options);
        assert_eq!(CudaSetting::of(&options), chosen);
        assert_eq!(options.memory_limit_mib, Some(2048), "the memory limit is not the search's");
        assert_eq!(chosen.brief(), "cuDNN heuristic nhwc small-workspace pinned graphs");
    }
}
