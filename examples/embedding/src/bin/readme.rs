use modelless::{BatchingConfig, Runtime, Tensor, VariantConfig};

#[tokio::main]
async fn main() -> Result<(), modelless::Error> {
    let batching = BatchingConfig::default().with_max_batch_size(8).with_max_queue_delay_us(2000);
    let runtime = Runtime::builder()
        .with_model(VariantConfig::plain("classifier", "models/mobilenetv2_1.0.onnx").with_batching(batching))
        .build_async() // loads and warms the model without blocking the executor
        .await?;
    let output = runtime.infer("classifier", Tensor::full([1, 3, 224, 224], 0.5f32)).await?;
    println!("{:?} in a batch of {}", output.first().map(|t| t.shape()), output.batch_size);
    Ok(())
}
