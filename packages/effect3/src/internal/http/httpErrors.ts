import { Data } from "effect"
import type * as Api from "../../HttpErrors.js"
import type { Fields } from "../errorFields.js"

export class ConnectFailed extends Data.TaggedError("ConnectFailed")<Fields<Api.ConnectFailed>> {
  override get message(): string {
    return `could not connect (${this.reason}) for ${this.request.method} ${this.request.url}`
  }
}

export class NoResponse extends Data.TaggedError("NoResponse")<Fields<Api.NoResponse>> {
  override get message(): string {
    return `no response (${this.reason}) for ${this.request.method} ${this.request.url}: it may have run`
  }
}

export class StatusError extends Data.TaggedError("StatusError")<Fields<Api.StatusError>> {
  override get message(): string {
    return `HTTP ${this.status} for ${this.response.request.method} ${this.response.request.url}`
  }
}
