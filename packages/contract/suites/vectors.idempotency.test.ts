/**
 * The driver of the shared idempotency vectors (packages/contract/vectors/idempotency.json, README.md there): each
 * vector's requests go through `IdempotencyMiddleware` over a memory store, under the TestClock, each in a fiber of
 * its own.
 */
import {
  captureLogs,
  errorOf,
  fork,
  type Forked,
  HttpServerRequest,
  HttpServerResponse,
  interruptedOnlyOf,
  pollUnsafe,
  scoped,
  settle as yields,
  TestClock
} from "#edition"
import { type Json, load, type Outcome, type Vector } from "#vectors"
import { describe, expect } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Option } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"

type Fields = { readonly [field: string]: Json }

/** What a client sees of an answer, as the vectors write it. */
const replyOf = (response: HttpServerResponse.HttpServerResponse) =>
  Effect.promise(async () => {
    const web = HttpServerResponse.toWeb(response)
    const retryAfter = web.headers.get("retry-after")
    return {
      status: web.status,
      body: await web.text(),
      replayed: web.headers.get(IdempotencyMiddleware.replayedHeader) === "true",
      ...(retryAfter === null ? {} : { retryAfter })
    }
  })

const requestOf = (request: Fields) => {
  const body = typeof request.body === "string" ? request.body : "{}"
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (typeof request.key === "string") headers["idempotency-key"] = request.key
  const method = typeof request.method === "string" ? request.method : "POST"
  const target = typeof request.target === "string" ? request.target : "/orders"
  const url = target.startsWith("/") ? `http://127.0.0.1${target}` : target
  return HttpServerRequest.fromWeb(new Request(url, { method, headers, body }))
}

/** A memory store; with `renewFails`, one whose `renew` fails, as for an owner cut off from the store. */
const storeFor = (policy: Fields) =>
  Effect.map(IdempotencyStore.makeMemory(), (store): IdempotencyStore.Store =>
    policy.renewFails === true
      ? {
        ...store,
        renew: () => Effect.fail(new IdempotencyStore.IdempotencyStoreError({ operation: "renew", cause: "cut off" }))
      }
      : store)

const exitOf = (exit: Exit.Exit<unknown, unknown> | undefined): unknown => {
  if (exit === undefined) return "pending"
  if (Exit.isSuccess(exit)) return { succeed: exit.value }
  if (interruptedOnlyOf(exit)) return "interrupted"
  const error = errorOf(exit)
  return Option.isSome(error) ? { fail: error.value } : { die: String(Cause.squash(exit.cause)) }
}

/** Lets every fiber run until it waits; web request bodies are read through promises. */
const settle = Effect.forEach(
  Array.from({ length: 6 }),
  () => Effect.andThen(yields, Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))),
  { discard: true }
)

const run = (vector: Vector) =>
  Effect.gen(function*() {
    const policy = vector.policy
    const store = yield* storeFor(policy)
    const middleware = yield* IdempotencyMiddleware.make({
      lease: Duration.millis(policy.lease as number),
      ttl: Duration.millis(policy.ttl as number),
      scope: () => Effect.succeed("client")
    }).pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, store))
    let runs = 0
    const calls = new Map<string, Forked<unknown, unknown>>()
    for (const step of vector.steps as ReadonlyArray<Record<string, Json>>) {
      if ("call" in step) {
        const takes = typeof step.takes === "number" ? step.takes : 0
        const handler = Effect.suspend(() => {
          const n = ++runs
          return Effect.as(Effect.sleep(Duration.millis(takes)), HttpServerResponse.text(`run ${n}`, { status: 201 }))
        })
        const call = middleware(handler).pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, requestOf(step.request as Fields)),
          Effect.flatMap(replyOf)
        )
        calls.set(step.call as string, yield* fork(call))
      } else if ("advance" in step) {
        yield* TestClock.adjust(Duration.millis(step.advance as number))
      } else if ("interrupt" in step) {
        yield* Fiber.interrupt(calls.get(step.interrupt as string)!)
      } else if ("expect" in step) {
        for (const [name, wanted] of Object.entries(step.expect as Record<string, Outcome>)) {
          const fiber = calls.get(name)
          if (fiber === undefined) throw new Error(`no call ${name}`)
          expect({ exit: exitOf(pollUnsafe(fiber)) }, `call ${name}`).toMatchObject({ exit: wanted.exit })
        }
      } else if ("expectState" in step) {
        expect({ runs }).toMatchObject(step.expectState as object)
      }
      yield* settle
    }
  }).pipe(Effect.provide(captureLogs().layer))

describe("vectors: idempotency", () => {
  for (const vector of load("idempotency").vectors) scoped(vector.name, () => run(vector))
})
