export { checkIsolation, scanIsolation, DEPENDENCY_FIELDS, SOURCE_EXTENSIONS } from "./check.js";
export type { CheckOptions, DependencyField, Form, IsolationReport, PackageInfo, Violation } from "./check.js";
export { findCycles, formatCycle, workspaceSourceRoots } from "./cycles.js";
export type { Cycle, CycleReport, ImportEdge } from "./cycles.js";
export { checkFloors, findHouses, readRules } from "./floors.js";
export type { FloorViolation, HouseRules } from "./floors.js";
