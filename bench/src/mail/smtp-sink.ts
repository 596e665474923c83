// A loopback SMTP server in a process of its own (so it does not share the sender's event
// loop): accepts every message, prints its port, counts messages on stdin "count\n".
import { SMTPServer } from "smtp-server";

let received = 0;
const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ["STARTTLS", "AUTH"],
  logger: false,
  maxClients: 1000,
  disableReverseLookup: true,
  onData(stream, _session, callback) {
    stream.on("data", () => undefined);
    stream.on("end", () => {
      received += 1;
      callback();
    });
  },
});
server.listen(0, "127.0.0.1", () => {
  const address = server.server.address() as { port: number };
  process.stdout.write(`port ${address.port}\n`);
});
process.stdin.on("data", () => process.stdout.write(`received ${received}\n`));
process.stdin.on("end", () => server.close(() => process.exit(0)));
