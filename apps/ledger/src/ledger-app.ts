import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import { AppModule, type AppOptions } from './app.module.js';

/** Builds the HTTP application on an already migrated database; `main` and the e2e tests both start it this way. */
export async function createLedgerApp(options: AppOptions): Promise<INestApplication> {
  const app = await NestFactory.create(AppModule.forRoot(options), { bufferLogs: true });
  app.useLogger(app.get(Logger));
  return app;
}
