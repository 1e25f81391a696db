/**
 * A redis-server of a test's own, on a free port, so the test can kill it and start it again (the Effect 3
 * edition's test/support/breakerFleet.ts has the same), and `itRecording`, an `it.effect` whose TestClock counts its
 * sleeps (for `untilSleeping`).
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import type { Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { recordingSleeps } from "./sleeps.js"

export const REDIS_SERVER = process.env.REDIS_SERVER ?? "/usr/bin/redis-server"

/** `it.effect` (TestClock, a scope) under `recordingSleeps`. */
export const itRecording = <A, E>(
  name: string,
  body: () => Effect.Effect<A, E, Scope.Scope>,
  timeout?: number
) => it.effect(name, () => recordingSleeps(body()), timeout)

const exited = (child: ChildProcess) =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
  })

/**
 * Starts redis-server on `port`; resolves once it accepts connections. No automatic persistence; it runs in a
 * temporary directory of its own, removed when it exits, unless `dir` is given: then it loads the `dump.rdb`
 * an earlier server left there by `SAVE` (the caller owns the directory).
 */
export const startRedisServer = (port: number, options: { readonly dir?: string } = {}) =>
  Effect.callback<ChildProcess, Error>((resume) => {
    const owned = options.dir === undefined
    const dir = options.dir ?? mkdtempSync(join(tmpdir(), "e4-redis-"))
    const child = spawn(REDIS_SERVER, [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir
    ], { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("Ready to accept connections")) resume(Effect.succeed(child))
    })
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.on("error", (error) => resume(Effect.fail(error)))
    child.on("exit", (code) => {
      if (owned) rmSync(dir, { recursive: true, force: true })
      resume(Effect.fail(new Error(`redis-server exited (${code}) before it was ready:\n${output}`)))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** SIGKILLs a process and waits for its exit. */
export const kill = (child: ChildProcess) =>
  Effect.suspend(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    return exited(child)
  })
