/**
 * The Effect-free part of the faults' child processes (both editions' `spawnScript`, in pgSupport.ts): a node
 * process whose stdout is read line by line, with callbacks for a line and for its exit. Each edition turns the
 * callbacks into its own effects.
 */
import { type ChildProcess, spawn } from "node:child_process"

export interface LineChild {
  readonly label: string
  readonly child: ChildProcess
  /** Every line written to stdout so far. */
  readonly lines: ReadonlyArray<string>
  /** stdout and stderr, for a failure's message. */
  readonly output: () => string
  /** Calls `f` with every later stdout line, synchronously as it arrives (so it can kill the child at once). */
  readonly onLine: (f: (line: string) => void) => void
  readonly exited: () => boolean
  /**
   * Calls `done` once: with the first stdout line matching `pattern` (one already written counts), or with an
   * error when the child exits first. Returns what stops waiting.
   */
  readonly onceLine: (pattern: RegExp, done: (line: string | Error) => void) => () => void
  /** Calls `f` once the child has exited (at once if it has). Returns what stops waiting. */
  readonly onExit: (f: () => void) => () => void
}

/** Starts `node <nodeArgs> <script> ...args` in `cwd`: one process, so a signal reaches the program itself. */
export const spawnLines = (
  label: string,
  program: { readonly cwd: string; readonly nodeArgs: ReadonlyArray<string> },
  script: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): LineChild => {
  const child = spawn(process.execPath, [...program.nodeArgs, script, ...args], {
    cwd: program.cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  const listeners: Array<(line: string) => void> = []
  let all = ""
  let partial = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    const text = chunk.toString()
    all += text
    const parts = (partial + text).split("\n")
    partial = parts.pop()!
    for (const line of parts) {
      lines.push(line)
      for (const f of listeners) f(line)
    }
  })
  child.stderr!.on("data", (chunk: Buffer) => {
    all = (all + chunk.toString()).slice(-20_000)
  })
  child.on("error", (error) => {
    all += `\nspawn failed: ${error.message}`
  })
  const exited = () => child.exitCode !== null || child.signalCode !== null
  const output = () => `${label}: ${all.slice(-4000)}`
  const onExit = (f: () => void) => {
    if (exited()) {
      f()
      return () => {}
    }
    child.once("exit", f)
    return () => void child.off("exit", f)
  }
  const onceLine = (pattern: RegExp, done: (line: string | Error) => void) => {
    const found = lines.find((line) => pattern.test(line))
    if (found !== undefined) {
      done(found)
      return () => {}
    }
    let finished = false
    const finish = (result: string | Error) => {
      if (finished) return
      finished = true
      stopExit()
      done(result)
    }
    const stopExit = onExit(() => finish(new Error(`${label} exited before printing ${pattern}\n${output()}`)))
    listeners.push((line) => pattern.test(line) && finish(line))
    return () => {
      finished = true
      stopExit()
    }
  }
  return {
    label,
    child,
    lines,
    output,
    onLine: (f) => void listeners.push(f),
    exited,
    onceLine,
    onExit
  }
}
