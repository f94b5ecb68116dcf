//! The Zig kit for modelless policies: the core ABI v1's exports around a policy
//! type, built for `wasm32-freestanding`. A policy is a struct with a default value
//! and
//!
//!     pub fn decide(self: *P, arena: std.mem.Allocator, snapshot: kit.Snapshot) !kit.Decision
//!
//! and optionally `pub fn init(self: *P, arena: std.mem.Allocator, parameters: []const u8) !void`;
//! `comptime { kit.exportPolicy(P); }` exports it. Each call gets an arena freed after
//! it; what the policy keeps across ticks it allocates from `kit.allocator`. An error
//! returned becomes the call's `{"error": ...}`. `types.zig` (generated from
//! policy-abi/schema/) holds the snapshot's and the decision's types.

const std = @import("std");
pub const types = @import("types.zig");
/// The rules a policy reads a snapshot by to agree with the host.
pub const rules = @import("rules.zig");
pub const Snapshot = types.Snapshot;
pub const Decision = types.Decision;
pub const TaskDecision = types.TaskDecision;
pub const ServingKnobs = types.ServingKnobs;

/// Memory that outlives a call.
pub const allocator = std.heap.wasm_allocator;

extern "modelless" fn log(level: i32, ptr: [*]const u8, len: i32) void;

/// How loud a logged line is; `warn` and `err` show in the policy's status.
pub const Level = enum(i32) { err = 0, warn = 1, info = 2, debug = 3, trace = 4 };

/// Logs a line through the host.
pub fn logLine(level: Level, message: []const u8) void {
    log(@intFromEnum(level), message.ptr, @intCast(message.len));
}

fn slice(ptr: i32, len: i32) []u8 {
    const address: usize = @intCast(@as(u32, @bitCast(ptr)));
    return @as([*]u8, @ptrFromInt(address))[0..@intCast(len)];
}

/// A buffer of `bytes` the host reads and frees through `dealloc`, packed as
/// `(ptr << 32) | len`.
fn output(bytes: []const u8) i64 {
    const copy = allocator.alloc(u8, @max(bytes.len, 1)) catch return 0;
    @memcpy(copy[0..bytes.len], bytes);
    const ptr: u64 = @intFromPtr(copy.ptr);
    return @bitCast((ptr << 32) | bytes.len);
}

fn failure(arena: std.mem.Allocator, err: anyerror) i64 {
    const message = std.json.Stringify.valueAlloc(arena, .{ .@"error" = @errorName(err) }, .{}) catch
        return output("{\"error\":\"OutOfMemory\"}");
    return output(message);
}

const parse_options: std.json.ParseOptions = .{ .ignore_unknown_fields = true, .allocate = .alloc_always };

/// Exports the ABI's functions around one value of `P`.
pub fn exportPolicy(comptime P: type) void {
    const Glue = struct {
        var policy: P = .{};

        fn marker() callconv(.c) void {}

        fn alloc(len: i32) callconv(.c) i32 {
            const buffer = allocator.alloc(u8, @intCast(@max(len, 1))) catch return 0;
            return @bitCast(@as(u32, @intCast(@intFromPtr(buffer.ptr))));
        }

        fn dealloc(ptr: i32, len: i32) callconv(.c) void {
            allocator.free(slice(ptr, @max(len, 1)));
        }

        fn decide(ptr: i32, len: i32) callconv(.c) i64 {
            var arena_state = std.heap.ArenaAllocator.init(allocator);
            defer arena_state.deinit();
            const arena = arena_state.allocator();
            const snapshot = std.json.parseFromSliceLeaky(Snapshot, arena, slice(ptr, len), parse_options) catch |e|
                return failure(arena, e);
            const decision = policy.decide(arena, snapshot) catch |e| return failure(arena, e);
            const json = std.json.Stringify.valueAlloc(arena, decision, .{ .emit_null_optional_fields = false }) catch |e|
                return failure(arena, e);
            return output(json);
        }

        fn init(ptr: i32, len: i32) callconv(.c) i64 {
            var arena_state = std.heap.ArenaAllocator.init(allocator);
            defer arena_state.deinit();
            const arena = arena_state.allocator();
            if (@hasDecl(P, "init")) policy.init(arena, slice(ptr, len)) catch |e| return failure(arena, e);
            return output("{}");
        }
    };
    @export(&Glue.marker, .{ .name = "modelless_policy_abi_v1" });
    @export(&Glue.alloc, .{ .name = "alloc" });
    @export(&Glue.dealloc, .{ .name = "dealloc" });
    @export(&Glue.decide, .{ .name = "decide" });
    @export(&Glue.init, .{ .name = "init" });
}
