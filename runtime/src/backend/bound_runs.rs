//! Batches run through ONNX Runtime's I/O binding, on input and output tensors kept
//! per batch shape, for a session on `cuda:N` whose config asks for CUDA graphs
//! (`cuda_graph`).
//!
//! With `enable_cuda_graph`, the CUDA provider captures the kernels of a run under the
//! run's graph id (the run option `gpu_graph_id`) and from then on replays them: one
//! launch for the whole model where a run launches each kernel on its own, which is
//! most of a small batch's time on a fast GPU. A replay reads and writes the very
//! device memory the captured run did, so each batch shape gets an id and input and
//! output tensors of its own, kept for the session's life: a batch, staged in host
//! memory, is copied into them and its answers out of them. Every run of such a
//! session must name its graph: one that named none would be captured as graph 0 and
//! replayed on whatever memory that run used. A shape past [`MAX_GRAPHS`], or any shape
//! of a model whose outputs leave a side besides the batch open (their size is known
//! only after the run), runs with id -1: not captured.

use std::collections::HashMap;

use ort::memory::{AllocationDevice, Allocator, MemoryInfo};
use ort::session::{IoBinding, NoSelectedOutputs, RunOptions, Session, SessionInputValue};
use ort::value::DynTensor;

use super::TensorSpec;
use super::ort_values::{read, read_outputs};
use crate::tensor::Tensor;

/// The most shapes a session captures a graph for. Padded GPU batches come in about
/// twenty sizes, and each graph keeps the device memory of its run.
const MAX_GRAPHS: usize = 32;

/// The graph id that runs a batch without capturing it.
const NOT_CAPTURED: &str = "-1";

/// The kept tensors and graphs of one session.
pub(crate) struct BoundRuns {
    allocator: Allocator,
    inputs: Vec<String>,
    outputs: Vec<TensorSpec>,
    /// By the batch's input shapes.
    graphs: HashMap<Vec<Vec<usize>>, Graph>,
    /// For the runs no graph is kept for.
    uncaptured: RunOptions<NoSelectedOutputs>,
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
        let mut uncaptured = RunOptions::new()?;
        uncaptured.set("gpu_graph_id", NOT_CAPTURED)?;
        Ok(BoundRuns {
            allocator: Allocator::new(session, memory)?,
            inputs: inputs.iter().map(|spec| spec.name.clone()).collect(),
            outputs: outputs.to_vec(),
            graphs: HashMap::new(),
            uncaptured,
        })
    }

    /// Runs the batch staged in host tensors `staged` on `session`: on its shape's
    /// graph, made on first use where one may be; else not captured. ONNX Runtime
    /// copies the batch into the graph's tensors and the answers out of them (it copies
    /// only from tensors it allocated: a view of a batch deadlocks its copy). Gives the
    /// outputs in the order of the session's.
    pub fn run(&mut self, session: &mut Session, staged: &[&DynTensor]) -> Result<Vec<Tensor>, ort::Error> {
        let shapes: Vec<Vec<usize>> =
            staged.iter().map(|t| t.shape().iter().map(|&side| side.max(0) as usize).collect()).collect();
        if !self.graphs.contains_key(&shapes) && self.graphs.len() < MAX_GRAPHS {
            let Some(output_shapes) = self.output_shapes(&shapes) else {
                return self.run_uncaptured(session, staged);
            };
            let graph = self.graph(session, staged, output_shapes)?;
            self.graphs.insert(shapes.clone(), graph);
        }
        let Some(graph) = self.graphs.get_mut(&shapes) else {
            return self.run_uncaptured(session, staged);
        };
        for (staged, kept) in staged.iter().zip(&mut graph.inputs) {
            staged.copy_into(&mut *kept)?;
        }
        drop(session.run_binding_with_options(&graph.binding, &graph.options)?);
        let outputs = graph.outputs.iter().zip(&self.outputs);
        outputs.map(|(kept, spec)| read(&kept.to(AllocationDevice::CPU, 0)?, spec.dtype)).collect()
    }

    /// The shapes of the outputs of a batch of inputs of `shapes`: each output's own,
    /// its first side the batch's; `None` where one leaves another side open.
    fn output_shapes(&self, shapes: &[Vec<usize>]) -> Option<Vec<Vec<usize>>> {
        let rows = *shapes.first()?.first()?;
        self.outputs
            .iter()
            .map(|spec| {
                let sides = spec.shape.iter().enumerate();
                sides.map(|(side, size)| size.or((side == 0).then_some(rows))).collect()
            })
            .collect()
    }

    /// A new graph for the batch `staged`: its tensors, bound, and the next id.
    fn graph(
        &self,
        session: &Session,
        staged: &[&DynTensor],
        output_shapes: Vec<Vec<usize>>,
    ) -> Result<Graph, ort::Error> {
        let inputs = staged
            .iter()
            .map(|t| DynTensor::new(&self.allocator, *t.data_type(), t.shape().clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outputs = self
            .outputs
            .iter()
            .zip(output_shapes)
            .map(|(spec, shape)| DynTensor::new(&self.allocator, super::ort_values::element_type(spec.dtype), shape))
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

    /// Runs the staged batch as it is, naming no graph to capture.
    fn run_uncaptured(&self, session: &mut Session, staged: &[&DynTensor]) -> Result<Vec<Tensor>, ort::Error> {
        let names = self.inputs.iter().map(|name| std::borrow::Cow::from(name.as_str()));
        let inputs: Vec<_> = names.zip(staged.iter().map(|&t| SessionInputValue::from(t))).collect();
        let outputs = session.run_with_options(inputs, &self.uncaptured)?;
        read_outputs(&outputs, &self.outputs)
    }
}
