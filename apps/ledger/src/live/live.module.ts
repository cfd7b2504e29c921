import { Inject, Module, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import type { EventLog } from '#event-log';
import { Logger } from 'nestjs-pino';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { LiveHub } from './live-hub.js';
import { LiveController } from './live.controller.js';

@Module({
  controllers: [LiveController],
  providers: [
    {
      provide: LiveHub,
      inject: [EVENT_LOG, Logger],
      useFactory: (eventLog: EventLog, logger: Logger) =>
        new LiveHub(eventLog, (error, what) => logger.warn({ err: error }, `live hub ${what}`)),
    },
  ],
})
export class LiveModule implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(@Inject(LiveHub) private readonly hub: LiveHub) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.hub.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.hub.stop();
  }
}
