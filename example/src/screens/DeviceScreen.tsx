// The device's memory and the engine's compute backends.
import { useState } from 'react';
import { ScrollView, Text } from 'react-native';
import {
  type BackendDevice,
  type DeviceCapabilities,
  getBackends,
  getDeviceCapabilities,
  optimalThreadCount,
} from 'react-native-local-llm-rs';
import { Button, ErrorText, Row, errorText, styles } from '../ui';

interface DeviceReport {
  capabilities: DeviceCapabilities;
  backends: BackendDevice[];
  threads: number;
}

function read(): DeviceReport {
  return { capabilities: getDeviceCapabilities(), backends: getBackends(), threads: optimalThreadCount() };
}

const gib = (bytes: number | null) => (bytes === null ? 'unknown' : `${(bytes / 1024 ** 3).toFixed(2)} GiB`);

/** The device screen (needs no model). */
export function DeviceScreen() {
  const [report, setReport] = useState<DeviceReport | null>(null);
  const [error, setError] = useState<string | null>(null);

  const refresh = () => {
    setError(null);
    try {
      setReport(read());
    } catch (e) {
      setError(errorText(e));
    }
  };

  return (
    <ScrollView contentContainerStyle={styles.screen}>
      <Text style={styles.title}>Device and backends</Text>
      <Button title="Read" onPress={refresh} />
      <ErrorText error={error} />
      {report !== null && (
        <>
          <Row label="Total RAM">{gib(report.capabilities.totalRAM)}</Row>
          <Row label="Available RAM">{gib(report.capabilities.availableRAM)}</Row>
          <Row label="Default threads">{report.threads}</Row>
          {report.backends.map((b) => (
            <Text key={b.name}>
              <Text style={styles.label}>{b.name}</Text> ({b.kind}): {b.description}
              {b.features.length > 0 ? `\n${b.features.join(' ')}` : ''}
            </Text>
          ))}
        </>
      )}
    </ScrollView>
  );
}
