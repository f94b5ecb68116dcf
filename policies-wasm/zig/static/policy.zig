//! The static policy in Zig, deciding exactly as the Rust `policies-wasm/static`:
//! serves each task with the variant and knobs it had on the policy's first tick,
//! asking for them again whenever a task drifts from them. With the parameter
//! `{"variant": "<name>"}` it pins that variant instead on every task that has one.

const std = @import("std");
const kit = @import("kit");

const Static = struct {
    /// What each task had when first seen (names owned by `kit.allocator`).
    configured: std.StringHashMapUnmanaged(kit.ServingKnobs) = .empty,
    pinned: ?[]const u8 = null,

    pub fn init(self: *Static, arena: std.mem.Allocator, parameters: []const u8) !void {
        const Parameters = struct { variant: ?[]const u8 = null };
        const given = try std.json.parseFromSliceLeaky(Parameters, arena, parameters, .{});
        self.pinned = if (given.variant) |v| try kit.allocator.dupe(u8, v) else null;
    }

    pub fn decide(self: *Static, arena: std.mem.Allocator, snapshot: kit.Snapshot) !kit.Decision {
        var tasks: std.ArrayList(kit.TaskDecision) = .empty;
        for (snapshot.tasks) |task| {
            const entry = try self.configured.getOrPut(kit.allocator, task.name);
            if (!entry.found_existing) {
                entry.key_ptr.* = try kit.allocator.dupe(u8, task.name);
                var variant = task.active.variant;
                if (self.pinned) |pinned| {
                    if (kit.rules.variant(task, pinned) != null) variant = pinned;
                }
                entry.value_ptr.* = task.active;
                entry.value_ptr.variant = try kit.allocator.dupe(u8, variant);
            }
            const want = entry.value_ptr.*;
            const have = task.active;
            var wants: kit.TaskDecision = .{ .task = task.name };
            if (!std.mem.eql(u8, want.variant, have.variant)) wants.variant = want.variant;
            if (want.max_batch_size != have.max_batch_size) wants.max_batch_size = want.max_batch_size;
            if (want.max_queue_delay_us != have.max_queue_delay_us) wants.max_queue_delay_us = want.max_queue_delay_us;
            if (want.instances != have.instances) wants.instances = want.instances;
            if (wants.variant != null or wants.max_batch_size != null or wants.max_queue_delay_us != null or
                wants.instances != null) try tasks.append(arena, wants);
        }
        return .{ .tasks = tasks.items };
    }
};

comptime {
    kit.exportPolicy(Static);
}
