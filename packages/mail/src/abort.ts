import { AsyncLocalStorage } from "node:async_hooks";
import diagnosticsChannel from "node:diagnostics_channel";
import type { Socket } from "node:net";
import { MailSendError } from "./errors.js";

interface SendScope {
  state: "running" | "aborted" | "settled";
  sockets: Set<Socket>;
}

/*
 * nodemailer has no per-message cancel: its SMTP transport opens a connection per send
 * and keeps it to itself. Node announces every client socket on the `net.client.socket`
 * channel, in the async context of the code that opened it, so a send run inside its own
 * scope learns which sockets are its own and can destroy them when the job is lost.
 * Best effort: implicit-TLS connections (port 465) are not announced, and a pooled
 * connection opened by an earlier send is not this send's to close.
 */
const scopes = new AsyncLocalStorage<SendScope>();
let listening = false;

function onClientSocket(message: unknown): void {
  const scope = scopes.getStore();
  const socket = (message as { socket?: Socket } | null)?.socket;
  if (!scope || !socket || scope.state === "settled") return;
  if (scope.state === "aborted") socket.destroy();
  else scope.sockets.add(socket);
}

function abortError(signal: AbortSignal): MailSendError {
  const reason: unknown = signal.reason;
  const why = reason instanceof Error ? reason.message : typeof reason === "string" ? reason : "aborted";
  return new MailSendError(`send aborted before the server confirmed it (${why})`, {
    retryable: true,
    code: "EABORT",
    cause: reason,
  });
}

/**
 * Runs `send`, and when `signal` fires rejects at once with a retryable `MailSendError`
 * (code `EABORT`) and closes the connections that this send opened, so that a message
 * not yet accepted by the server is not delivered by a worker that lost the job.
 */
export function sendWithSignal<T>(send: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return send();
  if (signal.aborted) return Promise.reject(abortError(signal));
  if (!listening) {
    diagnosticsChannel.subscribe("net.client.socket", onClientSocket);
    listening = true;
  }
  const scope: SendScope = { state: "running", sockets: new Set() };
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      scope.state = "aborted";
      for (const socket of scope.sockets) socket.destroy();
      reject(abortError(signal));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    scopes
      .run(scope, send)
      .then(resolve, reject)
      .finally(() => {
        signal.removeEventListener("abort", onAbort);
        scope.state = "settled";
        scope.sockets.clear();
      });
  });
}
