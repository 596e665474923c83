export { checkIsolation, scanIsolation, DEPENDENCY_FIELDS, SOURCE_EXTENSIONS } from "./check.js";
export type { CheckOptions, DependencyField, Form, IsolationReport, PackageInfo, Violation } from "./check.js";
export { findCycles, formatCycle, workspaceSourceRoots } from "./cycles.js";
export type { Cycle, CycleReport, ImportEdge } from "./cycles.js";
