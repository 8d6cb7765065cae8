{{/* The release's resource name: <release>-mcpgate, or <release> if it already says mcpgate. */}}
{{- define "mcpgate.fullname" -}}
{{- if contains "mcpgate" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-mcpgate" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mcpgate.selectorLabels" -}}
app.kubernetes.io/name: mcpgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mcpgate.labels" -}}
{{ include "mcpgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret holding MCPGATE_SEAL_KEYS (and MCPGATE_REDIS_URL). */}}
{{- define "mcpgate.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else -}}
{{- include "mcpgate.fullname" . -}}
{{- end -}}
{{- end -}}
