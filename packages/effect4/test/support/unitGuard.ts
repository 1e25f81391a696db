/**
 * Setup file of the unit project (vitest.config.ts): a unit test that opens a socket or starts a process
 * fails at once, naming the rule, instead of quietly depending on the machine. Such a test belongs in the
 * integration project: name it `*.int.test.ts`.
 */
import * as childProcess from "node:child_process"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as net from "node:net"

const refuse = (what: string) => () => {
  throw new Error(
    `${what} in a unit test: unit tests use no services, sockets or processes — ` +
      "name the file *.int.test.ts (an integration test, see vitest.config.ts)"
  )
}

// read by ./services.ts: a service-gated suite in a unit file fails, named, instead of being skipped
Object.assign(globalThis, { unitGuard: true })

net.Socket.prototype.connect = refuse("a network connection")
net.Server.prototype.listen = refuse("a listening server") // spawn, exec, execFile and fork all start through ChildProcess.prototype.spawn (untyped); the *Sync
 // functions do not
;(childProcess.ChildProcess.prototype as unknown as { spawn: unknown }).spawn = refuse("a child process")
const cjs = createRequire(import.meta.url)("node:child_process") as Record<string, unknown>
for (const name of ["spawnSync", "execSync", "execFileSync"]) cjs[name] = refuse("a child process")
syncBuiltinESMExports()
