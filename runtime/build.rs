//! With feature `grpc`: compiles the KServe V2 service definition to Rust with a
//! protobuf compiler written in Rust, so building needs no `protoc`.

fn main() {
    #[cfg(feature = "grpc")]
    compile_protos();
}

#[cfg(feature = "grpc")]
fn compile_protos() {
    println!("cargo:rerun-if-changed=proto/grpc_service.proto");
    let descriptors = match protox::compile(["grpc_service.proto"], ["proto"]) {
        Ok(descriptors) => descriptors,
        Err(e) => panic!("proto/grpc_service.proto: {e}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        // Raw tensor contents are sliced out of the received buffer, not copied.
        .bytes(".inference.ModelInferRequest.raw_input_contents")
        .bytes(".inference.ModelInferResponse.raw_output_contents")
        .compile_fds(descriptors)
    {
        panic!("generating the gRPC service: {e}");
    }
}
