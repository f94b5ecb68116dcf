//! Batches run through ONNX Runtime's I/O binding, on input and output tensors kept
//! per batch shape, for a session on `cuda:N` whose config asks for CUDA graphs
//! (`cuda_graph`).
//!
//! With `enable_cuda_graph`, the CUDA provider captures the kernels of a run under the
//! run's graph id (the run option `gpu_graph_id`) and from then on replays them: one
//! launch for the whole model where a run launches each kernel on its own, which is
//! most of a small batch's time on a fast GPU. A replay reads and writes the very
//! device memory the captured run did, so each batch shape gets an id and input and
//! output tensors of its own, kept for the session's life: a batch is copied into them
//! and its answers out of them. Every run of such a session must name its graph: one
//! that named none would be captured as graph 0 and replayed on whatever memory that
//! run used. A shape past [`MAX_GRAPHS`], or any shape of a model whose outputs leave a
//! side besides the batch open (their size is known only after the run), runs with id
//! -1: not captured.

use std::collections::HashMap;

use ort::memory::{AllocationDevice, Allocator, MemoryInfo};
use ort::session::{IoBinding, NoSelectedOutputs, RunOptions, Session};
use ort::value::DynTensor;

use super::TensorSpec;
use super::ort_values::{element_type, fill, host_memory, read, view};
use super::staging::Staging;
use crate::tensor::{DType, Tensor};

/// The most shapes a session captures a graph for. Padded GPU batches come in about
/// twenty sizes, and each graph keeps the device memory of its run.
const MAX_GRAPHS: usize = 32;

/// The graph id that runs a batch without capturing it.
const NOT_CAPTURED: &str = "-1";

/// How a batch reaches the tensors a session keeps for it, and its answers leave them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// The tensors are host memory: written and read in place.
    InPlace,
    /// The tensors are device memory: ONNX Runtime copies into and out of them.
    ThroughRuntime,
}

/// The kept tensors and graphs of one session.
pub(crate) struct BoundRuns {
    allocator: Allocator,
    transfer: Transfer,
    inputs: Vec<String>,
    outputs: Vec<TensorSpec>,
    /// By the batch's input shapes.
    graphs: HashMap<Vec<Vec<usize>>, Graph>,
    /// For the runs no graph is kept for.
    uncaptured: RunOptions<NoSelectedOutputs>,
    /// Where batches are staged for ONNX Runtime to copy them to the device, when the
    /// session stages none: it copies from tensors of its own only.
    host: Staging,
}

/// One shape's tensors, bound, and the run options that name its graph.
struct Graph {
    inputs: Vec<DynTensor>,
    outputs: Vec<DynTensor>,
    binding: IoBinding,
    options: RunOptions<NoSelectedOutputs>,
}

impl BoundRuns {
    /// Tensors in `memory` for `session`, whose inputs and outputs are these.
    pub fn new(
        session: &Session,
        memory: MemoryInfo,
        inputs: &[TensorSpec],
        outputs: &[TensorSpec],
    ) -> Result<Self, ort::Error> {
        let device = memory.allocation_device();
        let host = device == AllocationDevice::CPU || device == AllocationDevice::CUDA_PINNED;
        let transfer = if host { Transfer::InPlace } else { Transfer::ThroughRuntime };
        let mut uncaptured = RunOptions::new()?;
        uncaptured.set("gpu_graph_id", NOT_CAPTURED)?;
        Ok(BoundRuns {
            host: Staging::in_memory(session, host_memory()?)?,
            allocator: Allocator::new(session, memory)?,
            transfer,
            inputs: inputs.iter().map(|spec| spec.name.clone()).collect(),
            outputs: outputs.to_vec(),
            graphs: HashMap::new(),
            uncaptured,
        })
    }

    /// Copies kept tensors through ONNX Runtime even where they are host memory, as
    /// device memory is: the same path, where there is no GPU.
    pub fn with_transfer(mut self, transfer: Transfer) -> Self {
        self.transfer = transfer;
        self
    }

    /// Runs `batch` on `session`: on its shape's graph, made on first use where one may
    /// be; else not captured. Gives the outputs in the order of the session's.
    /// Device tensors are filled from `staging`'s copy of the batch where it has one.
    pub fn run(
        &mut self,
        session: &mut Session,
        batch: &[Tensor],
        staging: Option<&mut Staging>,
    ) -> Result<Vec<Tensor>, ort::Error> {
        let shapes: Vec<Vec<usize>> = batch.iter().map(|t| t.shape().to_vec()).collect();
        if !self.graphs.contains_key(&shapes) && self.graphs.len() < MAX_GRAPHS {
            let Some(output_shapes) = self.output_shapes(batch) else {
                return self.run_uncaptured(session, batch);
            };
            let graph = self.graph(session, batch, output_shapes)?;
            self.graphs.insert(shapes.clone(), graph);
        }
        let Some(graph) = self.graphs.get_mut(&shapes) else {
            return self.run_uncaptured(session, batch);
        };
        match self.transfer {
            Transfer::InPlace => {
                for (input, kept) in batch.iter().zip(&mut graph.inputs) {
                    fill(kept, input)?;
                }
            }
            Transfer::ThroughRuntime => {
                let staged = staging.unwrap_or(&mut self.host).stage(batch)?;
                for (staged, kept) in staged.into_iter().zip(&mut graph.inputs) {
                    staged.copy_into(&mut *kept)?;
                }
            }
        }
        drop(session.run_binding_with_options(&graph.binding, &graph.options)?);
        graph
            .outputs
            .iter()
            .zip(&self.outputs)
            .map(|(kept, spec)| match self.transfer {
                Transfer::InPlace => read(kept, spec.dtype),
                Transfer::ThroughRuntime => read(&kept.to(AllocationDevice::CPU, 0)?, spec.dtype),
            })
            .collect()
    }

    /// The shapes of the outputs of a batch of `batch`'s rows: each output's own, its
    /// first side the batch's; `None` where one leaves another side open.
    fn output_shapes(&self, batch: &[Tensor]) -> Option<Vec<Vec<usize>>> {
        let rows = batch.first().map(Tensor::rows)?;
        self.outputs
            .iter()
            .map(|spec| {
                let sides = spec.shape.iter().enumerate();
                sides.map(|(side, size)| size.or((side == 0).then_some(rows))).collect()
            })
            .collect()
    }

    /// A new graph for `batch`'s shapes: its tensors, bound, and the next id.
    fn graph(&self, session: &Session, batch: &[Tensor], output_shapes: Vec<Vec<usize>>) -> Result<Graph, ort::Error> {
        let new = |dtype: DType, shape: Vec<usize>| DynTensor::new(&self.allocator, element_type(dtype), shape);
        let inputs = batch.iter().map(|t| new(t.dtype(), t.shape().to_vec())).collect::<Result<Vec<_>, _>>()?;
        let mut outputs = self
            .outputs
            .iter()
            .zip(output_shapes)
            .map(|(spec, shape)| new(spec.dtype, shape))
            .collect::<Result<Vec<_>, _>>()?;
        let mut binding = session.create_binding()?;
        for (name, tensor) in self.inputs.iter().zip(&inputs) {
            binding.bind_input(name, tensor)?;
        }
        for (spec, tensor) in self.outputs.iter().zip(&mut outputs) {
            binding.bind_output(&spec.name, tensor)?;
        }
        let mut options = RunOptions::new()?;
        // Ids from 1: 0 is the one a run that names none gets.
        options.set("gpu_graph_id", (self.graphs.len() + 1).to_string())?;
        Ok(Graph { inputs, outputs, binding, options })
    }

    /// Runs `batch` as it is, naming no graph to capture.
    fn run_uncaptured(&self, session: &mut Session, batch: &[Tensor]) -> Result<Vec<Tensor>, ort::Error> {
        let inputs = self
            .inputs
            .iter()
            .zip(batch)
            .map(|(name, tensor)| Ok((std::borrow::Cow::from(name.as_str()), view(tensor)?)))
            .collect::<Result<Vec<_>, ort::Error>>()?;
        let outputs = session.run_with_options(inputs, &self.uncaptured)?;
        self.outputs
            .iter()
            .map(|spec| {
                let value = outputs
                    .get(&spec.name)
                    .ok_or_else(|| ort::Error::new(format!("output `{}` missing", spec.name)))?;
                read(value, spec.dtype)
            })
            .collect()
    }
}
