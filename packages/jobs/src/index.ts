export { enqueue, enqueueMany, type EnqueueOptions, type EnqueueManyItem, type EnqueueManyOptions, type JobOptions } from "./enqueue.js";
export { processOne, drain, type ProcessOptions, type DrainOptions } from "./process.js";
export { runWorker, createWorker, Worker, type WorkerOptions } from "./worker.js";
export { getJob, pendingCount, statusCounts, type ReadOptions } from "./status.js";
export { heartbeat, DEFAULT_LEASE_SECONDS } from "./lease.js";
export { reclaim, WORKER_LOST_PREFIX, type ReclaimOptions } from "./reclaim.js";
export {
  cancelJob,
  retryJob,
  prune,
  pruneHistory,
  historyPartitions,
  type AdminOptions,
  type PruneOptions,
  type PruneHistoryOptions,
  type HistoryPartition,
} from "./admin.js";
export { handler } from "./handlers.js";
export { listJobs, type ListJobsOptions, type JobListItem, type JobList } from "./list.js";
export { observeQueueDepth } from "./queue-metrics.js";
export { setLimit, removeLimit, listLimits, type LimitSettings, type RateLimitSettings, type LimitStatus, type RateLimit } from "./limits.js";
export { setGroupWeight, listGroups, type GroupStatus } from "./groups.js";
export {
  schedule,
  unschedule,
  pauseSchedule,
  resumeSchedule,
  syncSchedules,
  listSchedules,
  triggerSchedule,
  DEFAULT_CATCH_UP_LIMIT,
  type ScheduleOptions,
  type ScheduleDeclaration,
  type SyncSchedulesOptions,
  type ScheduleChange,
  type ScheduleStatus,
} from "./schedules.js";
export { scheduleMaintenance, PRUNE_TASK, PRUNE_HISTORY_TASK, RECLAIM_TASK, type MaintenanceOptions } from "./maintenance.js";
export { observeFlowControl } from "./flow-metrics.js";
export { migrate, migrationSql, schemaVersion, latestVersion, type MigrateResult } from "./migrate.js";
export { connect, closeDefaultDatabase, DEFAULT_SQLITE_FILE, type ConnectOptions, type DbLike } from "./connect.js";
export { JobsDatabase, TABLE_NAME } from "./db/database.js";
export type { DialectName } from "./db/executor.js";
export { JobError } from "./errors.js";
export { JobAbortedError } from "./abort.js";
export { snooze, JobSnooze, MAX_SNOOZE_SECONDS } from "./snooze.js";
export { retryDelaySeconds } from "./backoff.js";
export { PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_HIGH } from "./priority.js";
export type { RunEvent, WorkerEvents, WorkerEventName, WorkerListener, WorkerEventHandlers } from "./events.js";
export type { Logger } from "./logger.js";
export type {
  Job,
  JobStatus,
  PendingJob,
  RunningJob,
  DoneJob,
  FailedJob,
  CancelledJob,
  WaitingJob,
  DependencyInfo,
  BatchSummary,
  JobHandler,
  JobContext,
  JobInfo,
  ReclaimedJob,
  Handlers,
  QueueStatus,
  StatusCountsByState,
  TaskName,
  PayloadOf,
} from "./types.js";
export { fromQuery } from "./connect.js";
export type { QuerySource, QueryAnswer } from "./db/query-executor.js";
export { checkpointIn } from "./checkpoint-in.js";
export { enqueueBatch, type EnqueueBatchOptions, type BatchCallback, type EnqueuedBatch } from "./batch-enqueue.js";
export type { DependencyFailurePolicy } from "./options.js";
