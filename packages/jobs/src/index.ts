export { enqueue, enqueueMany, type EnqueueOptions, type EnqueueManyItem, type EnqueueManyOptions, type JobOptions } from "./enqueue/enqueue.js";
export { processOne, drain, type ProcessOptions, type DrainOptions } from "./worker/process.js";
export { runWorker, createWorker, Worker, type WorkerOptions } from "./worker/worker.js";
export { getJob, pendingCount, statusCounts, type ReadOptions } from "./reads/status.js";
export { heartbeat, DEFAULT_LEASE_SECONDS } from "./run/lease.js";
export { reclaim, WORKER_LOST_PREFIX, type ReclaimOptions } from "./maintenance/reclaim.js";
export { agePriorities } from "./maintenance/age-priorities.js";
export { DEFAULT_AGING_MAX } from "./core/aging.js";
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
} from "./maintenance/admin.js";
export { handler } from "./base/handlers.js";
export { listJobs, type ListJobsOptions, type JobListItem, type JobList } from "./reads/list.js";
export { getJobAttempts, type JobAttempt } from "./reads/attempts.js";
export { getJobSteps, type JobStep, type JobSteps, type JobWaitingFor } from "./reads/steps.js";
export { waitForJob, JobWaitTimeoutError, type WaitForJobOptions } from "./reads/wait-for-job.js";
export { PROGRESS_WRITE_INTERVAL_MS } from "./run/report-progress.js";
export { listWorkers, type WorkerStatus, type ListWorkersOptions } from "./reads/workers.js";
export { pauseQueue, resumeQueue } from "./maintenance/pause.js";
export { observeQueueDepth } from "./reads/queue-metrics.js";
export { setLimit, removeLimit, listLimits, type LimitSettings, type RateLimitSettings, type LimitStatus, type RateLimit } from "./flow/limits.js";
export { setGroupWeight, listGroups, type GroupStatus } from "./flow/groups.js";
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
} from "./schedules/schedules.js";
export { scheduleMaintenance, PRUNE_TASK, PRUNE_HISTORY_TASK, RECLAIM_TASK, type MaintenanceOptions } from "./maintenance/maintenance.js";
export { observeFlowControl } from "./flow/flow-metrics.js";
export { migrate, migrationSql, schemaVersion, latestVersion, type MigrateResult } from "./migrations/migrate.js";
export { connect, closeDefaultDatabase, DEFAULT_SQLITE_FILE, type ConnectOptions, type DbLike } from "./core/connect.js";
export { JobsDatabase, TABLE_NAME } from "./core/database.js";
export type { DialectName } from "./db/executor.js";
export { JobError } from "./base/errors.js";
export { aesGcmCodec, type PayloadCodec, type AesGcmCodecOptions } from "./base/payload-codec.js";
export { JobAbortedError } from "./base/abort.js";
export { snooze, JobSnooze, MAX_SNOOZE_SECONDS } from "./run/snooze.js";
export { DEAD_LETTER_TASK, type DeadLetterPayload } from "./run/dead-letter.js";
export { retryDelaySeconds } from "./base/backoff.js";
export { PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_HIGH } from "./base/priority.js";
export type { RunEvent, WorkerEvents, WorkerEventName, WorkerListener, WorkerEventHandlers } from "./core/events.js";
export type { Logger } from "./base/logger.js";
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
  JobDependencyWait,
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
  WaitForEventOptions,
  InvokeOptions,
} from "./base/types.js";
export { ChildJobError, type ChildAnswer } from "./run/invoke.js";
export { sendEvent, type SendEventOptions } from "./events/send.js";
export { fromQuery } from "./core/connect.js";
export type { QuerySource, QueryAnswer } from "./db/query-executor.js";
export { checkpointIn } from "./run/checkpoint-in.js";
export { enqueueBatch, type EnqueueBatchOptions, type BatchCallback, type EnqueuedBatch } from "./enqueue/batch-enqueue.js";
export type {
  DependencyFailurePolicy,
  ThrottleWindow,
  DebounceWindow,
  JobDefaults,
  QueueJobDefaults,
  PriorityAging,
  SequenceOptions,
  SequenceFailurePolicy,
} from "./core/options.js";
