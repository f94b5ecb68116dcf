//! The rules a policy reads a snapshot by to agree with the host, as the Rust kit has
//! them (policy-abi/src/rules.rs): which variant serves a task, whether a variant may
//! serve, and the cores serving instances hold, the pool sessions share counted once.
//! Its test checks them against the cases the Rust rules answered
//! (policy-abi/schema/rules-cases.json): `python -m ziglang test rules.zig`.

const std = @import("std");
const types = @import("types.zig");

/// The variant of `task` named `name`.
pub fn variant(task: types.TaskSnapshot, name: []const u8) ?types.VariantSnapshot {
    for (task.variants) |v| {
        if (std.mem.eql(u8, v.name, name)) return v;
    }
    return null;
}

/// The variant serving the task: the one `active` names.
pub fn activeVariant(task: types.TaskSnapshot) ?types.VariantSnapshot {
    return variant(task, task.active.variant);
}

/// The index of the serving variant in `variants`.
pub fn activeIndex(task: types.TaskSnapshot) ?usize {
    for (task.variants, 0..) |v, i| {
        if (std.mem.eql(u8, v.name, task.active.variant)) return i;
    }
    return null;
}

/// Whether the variant fits its task and did not fail to load.
pub fn mayServe(v: types.VariantSnapshot) bool {
    return v.refused == null and v.state != .failed;
}

/// Instances serving and starting.
pub fn servingInstances(v: types.VariantSnapshot) u32 {
    return v.instances + v.instances_starting;
}

const Held = struct { own: f64, pooled: bool };

fn servingCores(task: types.TaskSnapshot) Held {
    const v = activeVariant(task) orelse return .{ .own = 0, .pooled = false };
    const share = v.share orelse return .{ .own = 0, .pooled = false };
    const serving = servingInstances(v);
    return .{ .own = share.cores * @as(f64, @floatFromInt(serving)), .pooled = share.cores == 0 and serving > 0 };
}

/// The cores the task's serving instances hold, the shared pool counted where they run on it.
pub fn taskCoresHeld(task: types.TaskSnapshot, shared_pool_cores: f64) f64 {
    const held = servingCores(task);
    return held.own + if (held.pooled) shared_pool_cores else 0;
}

/// The cores the serving instances of `tasks` hold: each task's own, and the shared pool once.
pub fn coresHeld(tasks: []const types.TaskSnapshot, shared_pool_cores: f64) f64 {
    var own: f64 = 0;
    var pooled = false;
    for (tasks) |task| {
        const held = servingCores(task);
        own += held.own;
        pooled = pooled or held.pooled;
    }
    return own + if (pooled) shared_pool_cores else 0;
}

const Expected = struct {
    active_variant: ?[]const u8,
    active_index: ?usize,
    cores_held: f64,
    may_serve: []const bool,
    serving_instances: []const u32,
};

const Case = struct {
    tasks: []const types.TaskSnapshot,
    shared_pool_cores: f64,
    expected: struct { tasks: []const Expected, cores_held: f64 },
};

test "the rules answer every case as the host's Rust rules answered it" {
    const allocator = std.testing.allocator;
    const text = @embedFile("rules-cases.json");
    const parsed = try std.json.parseFromSlice(struct { cases: []const Case }, allocator, text, .{ .ignore_unknown_fields = true });
    defer parsed.deinit();
    for (parsed.value.cases) |case| {
        for (case.tasks, case.expected.tasks) |task, want| {
            const active: ?[]const u8 = if (activeVariant(task)) |v| v.name else null;
            if (want.active_variant) |name| {
                try std.testing.expectEqualStrings(name, active.?);
            } else try std.testing.expect(active == null);
            try std.testing.expectEqual(want.active_index, activeIndex(task));
            try std.testing.expectEqual(want.cores_held, taskCoresHeld(task, case.shared_pool_cores));
            for (task.variants, want.may_serve, want.serving_instances) |v, serves, serving| {
                try std.testing.expectEqual(serves, mayServe(v));
                try std.testing.expectEqual(serving, servingInstances(v));
            }
        }
        try std.testing.expectEqual(case.expected.cores_held, coresHeld(case.tasks, case.shared_pool_cores));
    }
}
