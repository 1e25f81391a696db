import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schedule } from "effect"
import { execFileSync, spawn } from "node:child_process"
import { connect, type Socket } from "node:net"
import { fileURLToPath } from "node:url"
import { RateLimitHeaders } from "../src/index.js"
import { orderCount, postOrder, request, startServe } from "./support/serveProcess.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const repository = fileURLToPath(new URL("../../..", import.meta.url))

/** Runs `examples/serve.ts` with `args` and waits for it to exit (only for arguments that make it exit). */
const runServe = (args: ReadonlyArray<string>) =>
  Effect.async<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", "examples/serve.ts", ...args], { cwd: root })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Polls `check` every 100 ms until it holds; fails after `capMillis` (a generous cap, not a guess). */
const eventually = <A>(what: string, check: Effect.Effect<A | undefined>, capMillis = 60_000) =>
  check.pipe(
    Effect.flatMap((a) => a === undefined ? Effect.fail(new Error(`not yet: ${what}`)) : Effect.succeed(a)),
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(capMillis)))
  )

interface Proc {
  readonly pid: number
  readonly args: string
}

/** Every live (not zombie) process, from `ps`. */
const processes = (): Array<Proc & { readonly ppid: number }> =>
  execFileSync("ps", ["-A", "-o", "pid=,ppid=,stat=,args="], { encoding: "utf8" })
    .split("\n")
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null && !m[3]!.startsWith("Z"))
    .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[4]! }))

/** `pid` and all its descendants. */
const tree = (pid: number): Array<Proc> => {
  const all = processes()
  const found = all.filter((p) => p.pid === pid)
  for (let i = 0; i < found.length; i++) found.push(...all.filter((p) => p.ppid === found[i]!.pid))
  return found.map(({ args, pid }) => ({ pid, args }))
}

/** Of `procs`, those still running (same pid, same command line: a reused pid is another process). */
const stillRunning = (procs: ReadonlyArray<Proc>) => {
  const now = processes()
  return procs.filter((p) => now.some((q) => q.pid === p.pid && q.args === p.args))
}

const refusesConnections = (port: number) =>
  Effect.async<boolean>((resume) => {
    const socket = connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(false))
    })
    socket.once("error", (error: NodeJS.ErrnoException) => resume(Effect.succeed(error.code === "ECONNREFUSED")))
  })

/**
 * `npm run serve:effect3 -- --port 0` at the repository's root exactly as a user starts it (npm → bash → npm → tsx
 * → node; `npm run serve` runs the Effect 4 edition's, tested in packages/effect4/test/serve.int.test.ts); the tree
 * is SIGKILLed when the scope closes if a test left anything running.
 */
const startThroughNpm = Effect.acquireRelease(
  Effect.async<{ readonly pid: number; readonly port: number }, Error>((resume) => {
    const child = spawn("npm", ["run", "serve:effect3", "--", "--port", "0"], {
      cwd: repository,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const read = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(output)
      if (match !== null) resume(Effect.succeed({ pid: child.pid!, port: Number(match[1]) }))
    }
    child.stdout.on("data", read)
    child.stderr.on("data", read)
    child.on("exit", (code) => resume(Effect.fail(new Error(`npm run serve:effect3 exited (${code}):\n${output}`))))
  }).pipe(Effect.map((started) => ({ ...started, tree: tree(started.pid) }))),
  ({ tree }) =>
    Effect.sync(() => {
      for (const p of stillRunning(tree)) {
        try {
          process.kill(p.pid, "SIGKILL")
        } catch {
          // gone meanwhile
        }
      }
    })
)

// Each test starts real processes; on a loaded machine one start can take 30 s. A cap, not an expectation.
const timeout = 180_000

// Black-box tests of `npm run serve`: a separate process, spoken to over HTTP only.
describe("npm run serve", () => {
  it.live("creates an order once per Idempotency-Key and replays it", () =>
    Effect.gen(function*() {
      const { url } = yield* startServe()
      expect((yield* request(`${url}/health`)).status).toBe(200)
      const first = yield* postOrder(url, { key: "order-1", body: { sku: "A", qty: 2 } })
      expect(first.status).toBe(201)
      const order = JSON.parse(first.body)
      expect(order).toMatchObject({ sku: "A", qty: 2 })
      expect(typeof order.id).toBe("string")
      const again = yield* postOrder(url, { key: "order-1", body: { sku: "A", qty: 2 } })
      expect(again.status).toBe(201)
      expect(again.body).toBe(first.body)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(yield* orderCount(url)).toBe(1)

      expect((yield* postOrder(url, { key: "order-1", body: { sku: "B" } })).status).toBe(422)
      expect((yield* postOrder(url, {})).status).toBe(400)
      expect(yield* orderCount(url)).toBe(1)
    }).pipe(Effect.scoped), timeout)

  it.live("a duplicate during a slow request gets 409; a crash is stored as its 500", () =>
    Effect.gen(function*() {
      const { url } = yield* startServe()
      // the first request commits, then takes 10 s to answer: a duplicate sent once the commit is seen is
      // surely during it, however slow this machine is
      const slow = { key: "slow", query: "?afterCommitMs=10000" }
      const first = yield* Effect.fork(postOrder(url, slow))
      yield* eventually("the first request committed", Effect.map(orderCount(url), (n) => n === 1 ? n : undefined))
      const duplicate = yield* postOrder(url, slow)
      expect(duplicate.status).toBe(409)
      expect(duplicate.headers.get("retry-after")).toBe("1")
      expect((yield* Fiber.join(first)).status).toBe(201)

      // a handler that died may have committed first: its 500 is the key's answer, it does not run again
      expect((yield* postOrder(url, { key: "crashy", query: "?crash=1" })).status).toBe(500)
      const retried = yield* postOrder(url, { key: "crashy", query: "?crash=1" })
      expect(retried.status).toBe(500)
      expect(retried.headers.get("idempotent-replayed")).toBe("true")
      expect((yield* postOrder(url, { key: "after-crash" })).status).toBe(201)
      expect((yield* postOrder(url, { key: "failing", query: "?fail=500" })).status).toBe(500)
      const replayed500 = yield* postOrder(url, { key: "failing", query: "?fail=500" })
      expect(replayed500.status).toBe(500)
      expect(replayed500.headers.get("idempotent-replayed")).toBe("true")
      expect(yield* orderCount(url)).toBe(2)
    }).pipe(Effect.scoped), timeout)

  it.live("--rate limits POST /orders with 429 and RateLimit headers", () =>
    Effect.gen(function*() {
      const { url } = yield* startServe(["--rate", "2:0.001"])
      const answers = []
      for (let i = 0; i < 3; i++) answers.push(yield* postOrder(url, { key: `r-${i}` }))
      expect(answers.map((a) => a.status)).toEqual([201, 201, 429])
      const denied = answers[2]!
      expect(Number(denied.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(RateLimitHeaders.parsePolicy(denied.headers.get("ratelimit-policy")!)._tag).toBe("Some")
      expect(yield* orderCount(url)).toBe(2)
    }).pipe(Effect.scoped), timeout)

  it.live(
    "GET /orders/:id answers the order a POST's Location names, and 404 problem+json for an unknown id",
    () =>
      Effect.gen(function*() {
        const { url } = yield* startServe()
        const created = yield* postOrder(url, { key: "find-me", body: { sku: "C", qty: 3 } })
        expect(created.status).toBe(201)
        const location = created.headers.get("location")!
        expect(location).toMatch(/^\/orders\/[^/]+$/)
        const found = yield* request(`${url}${location}`)
        expect(found.status).toBe(200)
        expect(JSON.parse(found.body)).toEqual(JSON.parse(created.body))

        const missing = yield* request(`${url}/orders/no-such-order`)
        expect(missing.status).toBe(404)
        expect(missing.headers.get("content-type")).toMatch(/^application\/problem\+json/)
        expect(JSON.parse(missing.body)).toMatchObject({ status: 404, title: "Not Found" })
        // the static route still wins over the parameter
        expect(JSON.parse((yield* request(`${url}/orders/count`)).body)).toEqual({ count: 1 })
      }).pipe(Effect.scoped),
    timeout
  )

  it.live(
    "fault hooks: waits are capped at 30 s, bad values are a 400 before anything happens",
    () =>
      Effect.gen(function*() {
        const { url } = yield* startServe()
        const bad = [
          "?delayMs=30001",
          "?delayMs=abc",
          "?delayMs=-1",
          "?delayMs=1e3",
          "?afterCommitMs=30001",
          "?afterCommitMs=soon",
          "?fail=404",
          "?crash=yes"
        ]
        for (const [i, query] of bad.entries()) {
          const answer = yield* postOrder(url, { key: `bad-${i}`, query })
          expect(answer.status, query).toBe(400)
          expect(answer.headers.get("content-type"), query).toMatch(/^application\/problem\+json/)
        }
        expect(yield* orderCount(url)).toBe(0)
        expect((yield* postOrder(url, { key: "ok", query: "?delayMs=1&afterCommitMs=1" })).status).toBe(201)
        expect(yield* orderCount(url)).toBe(1)
      }).pipe(Effect.scoped),
    timeout
  )

  it.live("?afterCommitMs: the order exists while its answer is still on the way", () =>
    Effect.gen(function*() {
      const { url } = yield* startServe()
      const abort = new AbortController()
      let settled = false
      const pending = fetch(`${url}/orders?afterCommitMs=30000`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": "late" },
        body: JSON.stringify({ sku: "LATE" }),
        signal: abort.signal
      }).then(() => (settled = true), () => (settled = true))
      yield* eventually("the order is committed", Effect.map(orderCount(url), (n) => n === 1 ? n : undefined))
      expect(settled).toBe(false) // committed, not answered: the client cannot know it worked
      const orders = JSON.parse((yield* request(`${url}/orders`)).body)
      expect(orders).toMatchObject([{ sku: "LATE" }])
      abort.abort()
      yield* Effect.promise(() => pending)
    }).pipe(Effect.scoped), timeout)

  it.live(
    "a client that hangs up after the commit: the retry waits, then gets the one order's answer",
    () =>
      Effect.gen(function*() {
        const { url } = yield* startServe()
        const abort = new AbortController()
        const order = { key: "hang-up", query: "?afterCommitMs=2000", body: { sku: "ONCE" } }
        const pending = fetch(`${url}/orders${order.query}`, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": order.key },
          body: JSON.stringify(order.body),
          signal: abort.signal
        }).catch(() => undefined)
        yield* eventually("the order is committed", Effect.map(orderCount(url), (n) => n === 1 ? n : undefined))
        abort.abort() // the client leaves between the commit and the answer
        yield* Effect.promise(() => pending)
        // its retry: 409 while the handler still runs (it does not run again), then the stored answer
        const replay = yield* eventually(
          "the answer is stored",
          Effect.map(postOrder(url, order), (a) => {
            expect([201, 409]).toContain(a.status)
            return a.status === 201 ? a : undefined
          })
        )
        expect(replay.headers.get("idempotent-replayed")).toBe("true")
        expect(JSON.parse(replay.body)).toMatchObject({ sku: "ONCE" })
        expect(yield* orderCount(url)).toBe(1)
      }).pipe(Effect.scoped),
    timeout
  )

  it.live(
    "--shed adaptive --capacity 4:20: stalled uploads hold no slot, and get 408 once their body is 5 s late",
    () =>
      Effect.gen(function*() {
        const { url } = yield* startServe(["--shed", "adaptive", "--capacity", "4:20"])
        const port = Number(new URL(url).port)
        // 8 clients send the headers of an order and the first byte of its body, then nothing
        const idle = yield* Effect.forEach(Array.from({ length: 8 }, (_, i) => i), (i) =>
          Effect.acquireRelease(
            Effect.async<{ socket: Socket; received: string; closed: boolean }>((resume) => {
              const socket = connect(port, "127.0.0.1", () => {
                const head = "POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                  `Content-Length: 20\r\nIdempotency-Key: idle-${i}\r\n\r\n{`
                socket.write(head, () => resume(Effect.succeed(upload)))
              })
              const upload = { socket, received: "", closed: false }
              socket.on("data", (chunk: Buffer) => (upload.received += chunk.toString("latin1")))
              socket.on("close", () => (upload.closed = true))
              socket.on("error", () => {})
            }),
            (upload) => Effect.sync(() => upload.socket.destroy())
          ))
        expect((yield* request(`${url}/health`)).status).toBe(200) // a round trip after their headers
        // another client's orders, one after another: all created while the uploads stall
        const statuses: Array<number> = []
        for (let i = 0; i < 20; i++) statuses.push((yield* postOrder(url, { key: `other-${i}` })).status)
        expect(statuses).toEqual(Array.from({ length: 20 }, () => 201))
        yield* eventually(
          "every stalled upload got its answer",
          Effect.sync(() => idle.every((upload) => upload.closed) || undefined)
        )
        for (const upload of idle) {
          const [head, body] = upload.received.split("\r\n\r\n")
          expect(head).toMatch(/^HTTP\/1\.1 408 /)
          expect(head!.toLowerCase()).toContain("content-type: application/problem+json")
          expect(JSON.parse(body!)).toMatchObject({ status: 408 })
        }
        expect(yield* orderCount(url)).toBe(20)
      }).pipe(Effect.scoped),
    timeout
  )

  it.live(
    "--api-keys: authentication first; keys, quotas and orders belong to the customer",
    () =>
      Effect.gen(function*() {
        const { url } = yield* startServe(["--api-keys", "key-a=alice,key-b=bob", "--rate", "2:0.01"])
        const as = (apiKey: string) => ({ "x-api-key": apiKey })
        expect((yield* postOrder(url, { key: "k" })).status).toBe(401)
        expect((yield* postOrder(url, { key: "k", headers: as("key-z") })).status).toBe(401)
        const alice = yield* postOrder(url, { key: "k", headers: as("key-a") })
        const bob = yield* postOrder(url, { key: "k", headers: as("key-b") })
        expect(alice.status).toBe(201)
        expect(bob.status).toBe(201)
        expect(bob.headers.get("idempotent-replayed")).toBeNull()
        expect(bob.headers.get("location")).not.toBe(alice.headers.get("location"))
        // each customer sees only their own orders
        expect(yield* orderCount(url, as("key-a"))).toBe(1)
        const bobsView = yield* request(`${url}${alice.headers.get("location")}`, { headers: as("key-b") })
        expect(bobsView.status).toBe(404)
        // and has their own quota: alice uses up hers, bob still has one
        expect((yield* postOrder(url, { key: "k2", headers: as("key-a") })).status).toBe(201)
        expect((yield* postOrder(url, { key: "k3", headers: as("key-a") })).status).toBe(429)
        expect((yield* postOrder(url, { key: "k4", headers: as("key-b") })).status).toBe(201)
      }).pipe(Effect.scoped),
    timeout
  )

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it.live(
      `stops on ${signal} sent to npm's pid: the port refuses connections and no process is left`,
      () =>
        Effect.gen(function*() {
          const { pid, port, tree } = yield* startThroughNpm
          expect(tree.length).toBeGreaterThanOrEqual(2) // npm and the server below it
          expect(yield* refusesConnections(port)).toBe(false)
          process.kill(pid, signal)
          yield* eventually("the port refuses connections", Effect.map(refusesConnections(port), (r) => r || undefined))
          yield* eventually(
            "every process npm started has exited",
            Effect.sync(() => stillRunning(tree).length === 0 || undefined)
          )
        }).pipe(Effect.scoped),
      timeout
    )
  }

  it.live("rejects bad command-line options", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(startServe(["--rate", "lots"]))
      expect(exit._tag).toBe("Failure")
    }).pipe(Effect.scoped), timeout)

  it.live(
    "--help prints the usage and exits 0; unknown options and stray arguments exit 2",
    () =>
      Effect.gen(function*() {
        const cases = [
          [["--verbose"], "unknown option --verbose"],
          [["8080"], "unexpected argument 8080"],
          [["--port", "1", "--port", "2"], "--port given twice"],
          [["--shed", "always"], "unknown --shed always"],
          [["--capacity", "0:20"], "bad --capacity"]
        ] as const
        const [help, ...refused] = yield* Effect.all(
          [runServe(["--help"]), ...cases.map(([args]) => runServe(args))],
          { concurrency: "unbounded" }
        )
        expect(help!.code).toBe(0)
        expect(help!.stdout).toMatch(/^usage: npm run serve/)
        cases.forEach(([args, message], i) => {
          expect(refused[i]!.code, args.join(" ")).toBe(2)
          expect(refused[i]!.stderr, args.join(" ")).toContain(message)
          expect(refused[i]!.stderr, args.join(" ")).toContain("usage: npm run serve")
        })
      }),
    timeout
  )
})
