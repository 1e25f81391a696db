/**
 * What the fault scenarios of `npm run faults` share: free ports, `serve` processes (examples/serve.ts run
 * by node with tsx as a loader, one process each, so a SIGKILL really kills the server), a private
 * `redis-server` in a temporary directory that a scenario may kill and restart, a keyed-POST client that
 * retries with the same Idempotency-Key until it gets a definitive answer, and waiting on conditions.
 *
 * Plain promises: the scenarios drive real processes and count what they see.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Every child started here, killed when this process exits however it ends (a scenario cleans up its own). */
const children = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of children) child.kill("SIGKILL")
})

const track = (child: ChildProcess): ChildProcess => {
  children.add(child)
  child.once("exit", () => children.delete(child))
  return child
}

/** Resolves after `ms` of real time: a chosen duration (an outage, a load period, a pause between retries). */
export const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Waits until `condition` holds, checking it every `everyMs`; rejects with `what` after `withinMs`. The cap is
 * generous: a busy machine passes, a hang still fails.
 */
export const until = async (
  what: string,
  condition: () => boolean | Promise<boolean>,
  options: { readonly withinMs?: number; readonly everyMs?: number } = {}
): Promise<void> => {
  const started = performance.now()
  const within = options.withinMs ?? 30_000
  for (;;) {
    if (await condition()) return
    if (performance.now() - started > within) throw new Error(`${what}: not within ${within} ms`)
    await pause(options.everyMs ?? 20)
  }
}

/** A TCP port of 127.0.0.1 nothing listens on: bound by the OS, then closed. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => (port === 0 ? reject(new Error("no port")) : resolve(port)))
    })
  })

/** Waits for the process to print `ready` (stdout or stderr); rejects when it exits first or after `withinMs`. */
const readyOrExit = (child: ChildProcess, ready: RegExp, what: string, withinMs: number) =>
  new Promise<RegExpExecArray>((resolve, reject) => {
    let output = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`${what} did not start within ${withinMs} ms:\n${output.slice(-2000)}`))
    }, withinMs)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = ready.exec(output)
      if (match !== null) {
        clearTimeout(timer)
        child.stdout?.off("data", onData)
        child.stderr?.off("data", onData)
        child.off("exit", onExit)
        resolve(match)
      }
    }
    const onExit = (code: number | null, signal: string | null) => {
      clearTimeout(timer)
      reject(new Error(`${what} exited (${code ?? signal}) before it was ready:\n${output.slice(-2000)}`))
    }
    child.stdout?.on("data", onData)
    child.stderr?.on("data", onData)
    child.once("exit", onExit)
    child.once("error", (error) => {
      clearTimeout(timer)
      reject(new Error(`${what} could not start: ${error.message}`))
    })
  })

/** Sends SIGKILL (or `signal`) and resolves once the process is gone. */
export const killProcess = (child: ChildProcess, signal: NodeJS.Signals = "SIGKILL"): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill(signal)
  })

export interface Served {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly child: ChildProcess
  /** The process' output since it was ready (its log lines: store failures, warnings), last 64 KiB. */
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/**
 * How a TypeScript program of the examples is run: `node <args> <script>` in `cwd`, the way of the edition whose
 * programs these are (plain node 22 over packages/effect4; tsx in packages/effect3). Each edition's entry point says
 * it through {@link useServeProgram} before it starts a server.
 */
export interface Program {
  readonly cwd: string
  readonly nodeArgs: ReadonlyArray<string>
  /** `npm run serve`'s program, relative to `cwd`. */
  readonly serve: string
}

let serveProgram: Program | undefined

/** Says which edition's `npm run serve` (and other server scripts) {@link startServe} starts. */
export const useServeProgram = (program: Program): void => {
  serveProgram = program
}

const program = (): Program => {
  if (serveProgram === undefined) {
    throw new Error("examples/faults/support.ts: no edition's program: call useServeProgram first")
  }
  return serveProgram
}

/** Starts `npm run serve`'s program with `args` on a port of its choosing and waits for its "listening on" line. */
export const startServe = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Served> =>
  startProgram(program(), program().serve, ["--port", "0", ...args], env)

/**
 * Starts another server script of the same edition (a path from its directory, run as {@link startServe} runs
 * `serve`: its examples/faults/failoverApp.ts) and waits for its "listening on"
 * line.
 */
export const startServer = (
  script: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Promise<Served> => startProgram(program(), script, args, env)

const startProgram = async (
  program: Program,
  script: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>
): Promise<Served> => {
  const child = track(spawn(process.execPath, [...program.nodeArgs, script, ...args], {
    cwd: program.cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  }))
  let output = ""
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-65536)
  }
  child.stdout!.on("data", keep)
  child.stderr!.on("data", keep)
  const match = await readyOrExit(child, /listening on (http:\/\/127\.0\.0\.1:\d+)/, script, 60_000)
  return { url: match[1]!, child, output: () => output, stop: () => killProcess(child) }
}

export interface PrivateRedis {
  readonly port: number
  readonly url: string
  /** SIGKILLs the server (no shutdown, no final write) and resolves once it is gone. */
  readonly kill: () => Promise<void>
  /** Starts it again on the same port and directory (it reloads its append-only file, if it keeps one). */
  readonly restart: () => Promise<void>
  /** Kills it and deletes its directory. */
  readonly stop: () => Promise<void>
}

/**
 * A `redis-server` of the scenario's own on a free 127.0.0.1 port, in a temporary directory. `durable`: an
 * append-only file fsynced on every write (`--appendonly yes --appendfsync always`), so a SIGKILL loses no
 * acknowledged write; without it the server keeps nothing on disk.
 */
export const startRedis = async (options: { readonly durable: boolean }): Promise<PrivateRedis> => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), "faults-redis-"))
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--daemonize",
    "no",
    "--protected-mode",
    "yes",
    ...(options.durable ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"])
  ]
  let child: ChildProcess | undefined
  const start = async () => {
    const started = track(spawn(process.env["REDIS_SERVER"] ?? "redis-server", args, {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"]
    }))
    child = started
    await readyOrExit(started, /Ready to accept connections/, `redis-server on port ${port}`, 30_000)
  }
  await start()
  const kill = async () => {
    if (child !== undefined) await killProcess(child)
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    restart: start,
    stop: async () => {
      await kill()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** One answer as the client saw it; status 0 for a request that got no answer (refused, reset, timed out). */
export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: string
  /** `performance.now()` when the answer (or the error) arrived. */
  readonly at: number
  /** Which server answered (its index in the list the client was given). */
  readonly server: number
}

/** POSTs `body` to `<base>/orders` with the key; one attempt, `timeoutMs` at most. */
export const postOnce = async (
  base: string,
  server: number,
  key: string,
  body: unknown,
  headers: Record<string, string>,
  timeoutMs = 10_000
): Promise<Answer> => {
  try {
    const response = await fetch(`${base}/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key, ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs)
    })
    return {
      status: response.status,
      headers: response.headers,
      body: await response.text(),
      at: performance.now(),
      server
    }
  } catch (error) {
    return { status: 0, headers: new Headers(), body: String(error), at: performance.now(), server }
  }
}

/** Whether an answer settles a keyed POST: the order was created (201) or its creation replayed. */
export const definitive = (answer: Answer): boolean => answer.status === 201

/**
 * What a well-behaved client does with a keyed POST: sends it, and on anything but a definitive answer
 * (no answer, 409 in progress, 429, 503, another 5xx) sends it again with the SAME key and body — to the
 * next server, as a load balancer would — after the server's `Retry-After` (at most `maxPauseMs`) or a
 * short backoff. Every answer goes to `seen`. Resolves with the definitive answer; rejects after `withinMs`.
 */
export const postUntilDefinitive = async (
  bases: ReadonlyArray<string>,
  first: number,
  key: string,
  body: unknown,
  headers: Record<string, string>,
  seen: (answer: Answer) => void,
  options: { readonly withinMs?: number; readonly maxPauseMs?: number } = {}
): Promise<{ readonly answer: Answer; readonly attempts: number }> => {
  const started = performance.now()
  const maxPause = options.maxPauseMs ?? 300
  for (let attempt = 1;; attempt++) {
    const server = (first + attempt - 1) % bases.length
    const answer = await postOnce(bases[server]!, server, key, body, headers)
    seen(answer)
    if (definitive(answer)) return { answer, attempts: attempt }
    if (answer.status >= 400 && answer.status < 500 && ![408, 409, 425, 429].includes(answer.status)) {
      throw new Error(`POST ${key}: ${answer.status} is not worth a retry: ${answer.body.slice(0, 300)}`)
    }
    if (performance.now() - started > (options.withinMs ?? 60_000)) {
      throw new Error(`POST ${key}: no definitive answer in ${attempt} attempts (last ${answer.status})`)
    }
    const retryAfter = Number(answer.headers.get("retry-after") ?? "NaN") * 1000
    const backoff = Math.min(maxPause, 20 * 2 ** Math.min(attempt, 6))
    await pause(Math.min(Number.isFinite(retryAfter) ? retryAfter : backoff, maxPause) * (0.5 + Math.random()))
  }
}

/** Runs `task(i)` for i in [0, n) with at most `concurrency` at once. */
export const pool = async (n: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> => {
  let next = 0
  const worker = async () => {
    while (next < n) await task(next++)
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker))
}

/** GET a JSON document; throws on a non-2xx answer. */
export const getJson = async <A>(url: string, headers: Record<string, string> = {}): Promise<A> => {
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) })
  const text = await response.text()
  if (!response.ok) throw new Error(`GET ${url}: ${response.status} ${text.slice(0, 300)}`)
  return JSON.parse(text) as A
}

/** How many of the items occur 0 times (lost) and how many extra times (duplicated). */
export const lostAndDuplicated = (
  expected: ReadonlyArray<string>,
  found: ReadonlyArray<string>
): { readonly lost: number; readonly duplicated: number; readonly unknown: number } => {
  const counts = new Map<string, number>(expected.map((id) => [id, 0]))
  let unknown = 0
  for (const id of found) {
    const count = counts.get(id)
    if (count === undefined) unknown++
    else counts.set(id, count + 1)
  }
  let lost = 0
  let duplicated = 0
  for (const count of counts.values()) {
    if (count === 0) lost++
    else duplicated += count - 1
  }
  return { lost, duplicated, unknown }
}
