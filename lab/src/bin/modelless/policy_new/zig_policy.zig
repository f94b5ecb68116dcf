//! {NAME}: a modelless policy in Zig. `decide` gets the snapshot and answers a
//! decision; tasks it leaves out keep everything. Build with ./build.sh, check with
//! `modelless policy check {NAME}.wasm`.

const std = @import("std");
const kit = @import("kit");

const Starter = struct {
    pub fn decide(_: *Starter, arena: std.mem.Allocator, snapshot: kit.Snapshot) !kit.Decision {
        for (snapshot.tasks) |task| {
            const line = try std.fmt.allocPrint(arena, "{s}: {d:.1}/s on {s}", .{ task.name, task.demand.per_s_10s, task.active.variant });
            kit.logLine(.info, line);
        }
        return .{ .tasks = &.{} };
    }
};

comptime {
    kit.exportPolicy(Starter);
}
