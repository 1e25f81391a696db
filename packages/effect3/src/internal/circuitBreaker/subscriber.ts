/**
 * One pub/sub connection for the channels of one or many fleet breakers (a keyed registry's breakers share
 * it: a connection per key would not scale), closed with the scope it was made in.
 */
import type { Scope } from "effect"
import { Effect } from "effect"
import * as redis from "../redis/client.js"

export interface Channels {
  /**
   * Calls `onMessage` with every message on `channel` for as long as the scope lasts. Returns once Redis
   * confirmed the subscription, or after `timeoutMillis`: a SUBSCRIBE that failed (Redis down) is sent again
   * when the connection is back.
   */
  readonly listen: (channel: string, onMessage: (message: string) => void) => Effect.Effect<void, never, Scope.Scope>
}

/**
 * A connection of its own (a `duplicate` of `client`, so it works for `Redis` and `Cluster` alike). ioredis
 * reconnects by itself after an outage; messages published meanwhile are lost, so a listener must not depend
 * on every one.
 */
export const make = (client: redis.Client, timeoutMillis: number): Effect.Effect<Channels, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const listeners = new Map<string, (message: string) => void>()
        const subscriber = client.duplicate()
        subscriber.on("error", () => {})
        subscriber.on("message", (from: string, message: string) => listeners.get(from)?.(message))
        // ioredis resubscribes after a reconnect only to channels whose SUBSCRIBE it saw answered: one that
        // failed (Redis down when it was sent) would be lost for good. Subscribing again at every "ready" is
        // harmless (a channel is subscribed once).
        subscriber.on("ready", () => {
          if (listeners.size > 0) subscriber.subscribe(...listeners.keys()).catch(() => undefined)
        })
        return { listeners, subscriber }
      }),
      ({ subscriber }) => Effect.sync(() => subscriber.disconnect())
    ),
    ({ listeners, subscriber }): Channels => ({
      listen: (channel, onMessage) =>
        Effect.acquireRelease(
          Effect.suspend(() => {
            listeners.set(channel, onMessage)
            return Effect.ignore(
              redis.call(() => subscriber.subscribe(channel), timeoutMillis, () => undefined, (e) => e)
            )
          }),
          () =>
            Effect.sync(() => {
              listeners.delete(channel)
              // nobody waits for the answer: the connection may be closing, or Redis down
              if (subscriber.status === "ready") subscriber.unsubscribe(channel).catch(() => undefined)
            })
        )
    })
  )
