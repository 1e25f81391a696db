import type { HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Data } from "effect"
import type { ConnectFailureReason } from "../../core/httpClassify.js"

export class ConnectFailed extends Data.TaggedError("ConnectFailed")<{
  readonly reason: ConnectFailureReason
  readonly request: HttpClientRequest.HttpClientRequest
  readonly cause: unknown
}> {
  override get message(): string {
    return `could not connect (${this.reason}) for ${this.request.method} ${this.request.url}`
  }
}

export class NoResponse extends Data.TaggedError("NoResponse")<{
  readonly reason: "read-timeout" | "reset"
  readonly request: HttpClientRequest.HttpClientRequest
  readonly cause: unknown
}> {
  override get message(): string {
    return `no response (${this.reason}) for ${this.request.method} ${this.request.url}: it may have run`
  }
}

export class StatusError extends Data.TaggedError("StatusError")<{
  readonly status: number
  readonly response: HttpClientResponse.HttpClientResponse
}> {
  override get message(): string {
    return `HTTP ${this.status} for ${this.response.request.method} ${this.response.request.url}`
  }
}
