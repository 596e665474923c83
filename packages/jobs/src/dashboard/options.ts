import type { DbLike } from "../core/connect.js";
import type { Logger } from "../base/logger.js";
import { PROGRESS_WRITE_INTERVAL_MS } from "../run/report-progress.js";
import { normaliseBasePath } from "./mount.js";

export interface DashboardOptions {
  /** The queue database (from `connect()`, or a pool). */
  db: DbLike;
  /** Where the handler is mounted, e.g. "/admin/jobs": links, form actions and the cookie path. */
  basePath: string;
  /** Page title. Default "Forge jobs". */
  title?: string;
  /** Seconds between automatic reloads (`<meta http-equiv="refresh">`); 0 = never. Default 5. */
  refreshSeconds?: number;
  /** Rows per list (running, pending, failures). Default 20, at most 100. */
  listLimit?: number;
  /**
   * Signs the CSRF tokens. Default: random per process — set one (16+ bytes) when several
   * processes serve the dashboard behind one address, so a form rendered by one is accepted by another.
   */
  secret?: string | Buffer;
  /** Where a failure to read the queue is reported when no `next` handler takes it. Default silent. */
  logger?: Logger;
  /**
   * Show and act on this tenant's jobs only: counts, lists, job pages, filters and actions
   * (another tenant's job is "not found"); the panels about the whole queue (chart, limits,
   * groups, schedules) are left out. Default: every tenant's.
   */
  tenant?: string;
  /**
   * Seconds between the reads of a job's events stream (`/jobs/:id/events`), at least 0.01:
   * match the workers' `progressInterval`. Default 0.5.
   */
  progressInterval?: number;
}

/** DashboardOptions checked once, with their defaults, in the units the handler uses. */
export interface DashboardSettings {
  basePath: string;
  title: string;
  refreshSeconds: number;
  listLimit: number;
  /** Milliseconds between the reads of a job's events stream. */
  progressMs: number;
}

export function dashboardSettings(options: DashboardOptions): DashboardSettings {
  const basePath = normaliseBasePath(options.basePath);
  const title = options.title ?? "Forge jobs";
  const refreshSeconds = options.refreshSeconds ?? 5;
  if (!Number.isInteger(refreshSeconds) || refreshSeconds < 0) {
    throw new TypeError(`createDashboard: refreshSeconds must be a whole number of seconds >= 0, got ${String(options.refreshSeconds)}`);
  }
  const listLimit = options.listLimit ?? 20;
  if (!Number.isInteger(listLimit) || listLimit < 1 || listLimit > 100) {
    throw new TypeError(`createDashboard: listLimit must be an integer from 1 to 100, got ${String(options.listLimit)}`);
  }
  const progressInterval = options.progressInterval ?? PROGRESS_WRITE_INTERVAL_MS / 1000;
  if (typeof progressInterval !== "number" || !Number.isFinite(progressInterval) || progressInterval < 0.01) {
    throw new TypeError(`createDashboard: progressInterval must be a number of seconds >= 0.01, got ${String(options.progressInterval)}`);
  }
  return { basePath, title, refreshSeconds, listLimit, progressMs: progressInterval * 1000 };
}
